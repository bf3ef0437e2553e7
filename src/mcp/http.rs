//! The Streamable HTTP transport of `toolsize mcp`: a local endpoint (`POST`/`GET`/`DELETE
//! /mcp`) forwarding to an MCP server at a URL.
//!
//! ```text
//! MCP client ──HTTP──▶ toolsize mcp --listen 127.0.0.1:PORT --upstream URL ──HTTP(S)──▶ server
//! ```
//!
//! # Endpoints
//!
//! * `/mcp`: every method is forwarded to the upstream URL with the client's headers (an
//!   `Authorization` header reaches the server unchanged), except the hop-by-hop ones, `Host`
//!   (the upstream's) and `Accept-Encoding` on `POST` (a result must be read to be measured).
//!   A `POST` body is read whole and handed to the shared `Proxy` (module `proxy`); a request it answers itself
//!   (arguments refused, `toolsize_read_spill`) gets its answer as `application/json` and is not
//!   forwarded. The response comes back with the server's status and headers: as it came when
//!   the proxy does not act on it; for the requests it acts on, an `application/json` body is
//!   read whole and a `text/event-stream` is relayed event by event as each event completes,
//!   only the event carrying the final response being read and, when changed, rebuilt.
//! * anything else: `404`.
//!
//! # Revisions and sessions
//!
//! Up to 2025-11-25, a server may name a session (`Mcp-Session-Id` on its `initialize` answer);
//! the proxy keeps what it learns per session (the client's name, the protocol version; at most
//! [`MAX_SESSIONS`], the oldest forgotten first), forwards the header both ways, and forgets the
//! session on `DELETE`. A request whose `POST` stream ends before its response (the client went
//! away; those revisions do not cancel on disconnect) stays with its session, at most
//! 64 of them: a `GET` stream of the session (resumed with `Last-Event-ID`)
//! is read for their responses, which are acted on like any other; everything else on a `GET`
//! stream passes as it is. On 2026-07-28 each request stands alone (no session, no `GET` stream); for the
//! requests it acts on, the proxy checks what the specification asks of any component that
//! processes the body: `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` (base64 sentinel
//! decoded) must match the body, else `400` with a `HeaderMismatch` (`-32020`) error, and the
//! server never sees the request. The proxy never rewrites a request, so headers and body stay
//! consistent on the way up; on the way down a rewritten body gets its own `Content-Length`.
//!
//! # Under load and failure
//!
//! Connections are served one task each on one I/O thread (measured: a second worker thread
//! doubled the latency the proxy adds, from cross-thread wake-ups), at most [`MAX_CONNECTIONS`]
//! at once (more wait in the listen backlog), with a [`HEADER_READ_TIMEOUT`] for request heads.
//! A response over [`BLOCKING_BYTES`] is acted on in the blocking pool, so a cut, which takes
//! milliseconds, never stalls the other connections. A request body over the maximum message
//! size (`--max-message-bytes`, [`DEFAULT_MAX_MESSAGE_BYTES`](super::DEFAULT_MAX_MESSAGE_BYTES))
//! is refused with `413`. A JSON response to a request acted on is read up to the same size;
//! past it the client gets a JSON-RPC error (`-32603`) under its request's id, and a response
//! that breaks off gets it `-32000`; a response the proxy does not act on passes unread. With
//! `--call-timeout`, a request with an id whose response's head does not come in time, or
//! whose response acted on does not complete in time, gets `-32001`. On an event stream, each
//! response awaited when the stream breaks, passes its time or ends without it (on a request
//! without a session) is sent as a JSON-RPC error event. These answers are `200`, so that the
//! client's SDK hands them to the waiting call, and each is said on standard error. Upstream
//! connections are kept for reuse while idle; one that cannot be reached in
//! [`CONNECT_TIMEOUT`] is a `502` with a JSON-RPC error naming no secret. When the client goes
//! away before its response is complete, the proxy drops the upstream request, which closes its
//! connection: on 2026-07-28 that *is* the cancellation the specification defines (closing the
//! response stream); on earlier revisions the server sees the same disconnect the client made
//! (those revisions cancel by `notifications/cancelled`, which passes through like any
//! notification). The call's span then ends as cancelled. Nothing of a header's value, an
//! argument or a result is logged; the upstream is logged without its query or credentials.
//! `SIGINT` or `SIGTERM` stops accepting, lets requests in flight finish for up to
//! [`DRAIN_TIMEOUT`], and ends what is left as cancelled.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};

use super::proxy::{self, lock, log_line, peek, Context, Inbound, Pending, Proxy, Session};
use super::sse::{self, Piece, Splitter};
use super::{codes, error_types, Options};

/// Most client connections served at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// Most HTTP sessions remembered (2025-03-26 to 2025-11-25).
pub const MAX_SESSIONS: usize = 4096;
/// Time for a client to send a request's head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Time to reach the upstream server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Time requests in flight get to finish at shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle upstream connections kept for reuse.
const MAX_IDLE: usize = 64;
/// Responses larger than this are acted on in the blocking pool, so that a cut (milliseconds)
/// never stalls the connections sharing the I/O thread.
pub const BLOCKING_BYTES: usize = 64 * 1024;

/// The path the proxy serves.
pub const PATH: &str = "/mcp";

/// `-32020`: the headers do not match the body (2026-07-28).
const HEADER_MISMATCH: i64 = -32020;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

/// Where the proxy forwards to.
#[derive(Clone)]
pub struct Upstream {
    tls: bool,
    host: String,
    port: u16,
    /// `host[:port]` as the `Host` header.
    authority: String,
    path_and_query: String,
    #[cfg(feature = "tls")]
    connector: Option<tokio_rustls::TlsConnector>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Why the HTTP proxy could not start.
#[derive(Debug)]
pub enum HttpError {
    /// The upstream URL is not one the proxy can use.
    Upstream(String),
    /// The listen address cannot be bound.
    Listen(io::Error),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Upstream(m) => f.write_str(m),
            HttpError::Listen(e) => write!(f, "cannot listen: {e}"),
        }
    }
}

impl std::error::Error for HttpError {}

impl Upstream {
    /// Parses `url` (`http://` or `https://`, with a path; userinfo refused: pass credentials as
    /// headers). `ca` is a PEM file of extra roots for `https`.
    pub fn parse(url: &str, ca: Option<&Path>) -> Result<Upstream, HttpError> {
        let bad = |why: &str| HttpError::Upstream(format!("--upstream {}: {why}", redact(url)));
        let uri: hyper::Uri = url
            .parse()
            .map_err(|_| bad("not a URL; give http://HOST[:PORT]/PATH or https://…"))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(bad("the scheme must be http or https")),
        };
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad(
                "credentials in the URL are not sent; pass them as a header (Authorization) from the client",
            ));
        }
        let host = authority.host().trim_matches(['[', ']']).to_owned();
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let path_and_query = uri
            .path_and_query()
            .map_or("/".to_owned(), |p| p.as_str().to_owned());
        if !tls && ca.is_some() {
            return Err(bad("--upstream-ca applies to https upstreams only"));
        }
        #[cfg(feature = "tls")]
        let connector = if tls {
            Some(tls_connector(ca).map_err(|e| bad(&e))?)
        } else {
            None
        };
        #[cfg(not(feature = "tls"))]
        if tls {
            return Err(bad(
                "this toolsize was built without TLS; rebuild with --features tls for https upstreams",
            ));
        }
        Ok(Upstream {
            tls,
            host,
            port,
            authority: authority.as_str().to_owned(),
            path_and_query,
            #[cfg(feature = "tls")]
            connector,
        })
    }

    /// The URL without its query (which may hold a key).
    pub fn redacted(&self) -> String {
        let path = self
            .path_and_query
            .split('?')
            .next()
            .unwrap_or("/")
            .to_owned();
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.authority)
    }
}

/// `url` without userinfo and query, for messages.
fn redact(url: &str) -> String {
    let no_query = url.split(['?', '#']).next().unwrap_or("");
    match (no_query.find("://"), no_query.find('@')) {
        (Some(s), Some(at)) if at > s => format!("{}{}", &no_query[..s + 3], &no_query[at + 1..]),
        _ => no_query.to_owned(),
    }
}

#[cfg(feature = "tls")]
fn tls_connector(ca: Option<&Path>) -> Result<tokio_rustls::TlsConnector, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let mut roots = crate::collector::net::client::roots::mozilla();
    if let Some(path) = ca {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("--upstream-ca {}: {e}", path.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("--upstream-ca {}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "--upstream-ca {}: no certificate in it",
                path.display()
            ));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("--upstream-ca {}: {e}", path.display()))?;
        }
    }
    crate::collector::net::client::roots::connector_with(roots, b"http/1.1")
}

/// An upstream connection: plain TCP or TLS.
enum Stream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// The bodies the proxy sends, both ways.
pub(crate) enum Out {
    /// A body known whole.
    Full(Option<Bytes>),
    /// Pieces as they are made (a relayed event stream).
    Chan(mpsc::Receiver<Bytes>),
    /// An upstream body relayed as it comes; its connection goes back to the pool at its end.
    Relay(Incoming, Option<Lease>),
}

impl Out {
    fn full(bytes: impl Into<Bytes>) -> Out {
        Out::Full(Some(bytes.into()))
    }
    fn empty() -> Out {
        Out::Full(None)
    }
}

impl Body for Out {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            Out::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Out::Chan(rx) => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
            Out::Relay(body, lease) => {
                let polled = Pin::new(&mut *body).poll_frame(cx);
                if let Poll::Ready(None) = polled {
                    if let Some(l) = lease.take() {
                        l.done();
                    }
                }
                polled
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Out::Full(b) => b.is_none(),
            Out::Chan(_) => false,
            Out::Relay(body, _) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Out::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Out::Full(None) => SizeHint::with_exact(0),
            Out::Chan(_) => SizeHint::default(),
            Out::Relay(body, _) => body.size_hint(),
        }
    }
}

/// Idle upstream connections.
struct Pool {
    upstream: Upstream,
    idle: Mutex<Vec<SendRequest<Out>>>,
}

/// An upstream connection lent to one exchange; [`Lease::done`] gives it back once its response
/// was read to the end. Dropped otherwise, the connection closes.
pub(crate) struct Lease {
    sender: SendRequest<Out>,
    pool: Arc<Pool>,
}

impl Lease {
    fn done(self) {
        let mut idle = lock(&self.pool.idle);
        if idle.len() < MAX_IDLE && !self.sender.is_closed() {
            idle.push(self.sender);
        }
    }
}

impl Pool {
    async fn connect(&self) -> io::Result<SendRequest<Out>> {
        let u = &self.upstream;
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            TcpStream::connect((u.host.as_str(), u.port)),
        )
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting timed out"))??;
        let _ = tcp.set_nodelay(true);
        let stream = if u.tls {
            #[cfg(feature = "tls")]
            {
                let connector = u
                    .connector
                    .clone()
                    .ok_or_else(|| io::Error::other("no TLS set-up"))?;
                let name = rustls_pki_types::ServerName::try_from(u.host.clone())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                let tls = tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp))
                    .await
                    .map_err(|_| {
                        io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out")
                    })??;
                Stream::Tls(Box::new(tls))
            }
            #[cfg(not(feature = "tls"))]
            {
                return Err(io::Error::other("built without TLS"));
            }
        } else {
            Stream::Plain(tcp)
        };
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Sends `req` on an idle connection, or a new one.
    async fn send(
        self: &Arc<Self>,
        mut req: Request<Out>,
    ) -> Result<(Response<Incoming>, Lease), io::Error> {
        loop {
            let idle = lock(&self.idle).pop();
            let Some(mut sender) = idle else { break };
            if sender.is_closed() || !sender.is_ready() {
                continue;
            }
            match sender.try_send_request(req).await {
                Ok(resp) => {
                    return Ok((
                        resp,
                        Lease {
                            sender,
                            pool: Arc::clone(self),
                        },
                    ))
                }
                Err(mut e) => match e.take_message() {
                    // Not sent (the connection closed while idle): try another.
                    Some(back) => req = back,
                    None => return Err(io::Error::other(e.into_error())),
                },
            }
        }
        let mut sender = self.connect().await?;
        let resp = sender.send_request(req).await.map_err(io::Error::other)?;
        Ok((
            resp,
            Lease {
                sender,
                pool: Arc::clone(self),
            },
        ))
    }
}

/// A message [`State::admit`] forwards: the call it awaits, and its JSON-RPC id.
type Forwarded = (Option<Pending>, Option<Value>);

/// Sessions by `Mcp-Session-Id`, oldest first.
#[derive(Default)]
struct Sessions {
    by_id: HashMap<String, Arc<Session>>,
    order: VecDeque<String>,
}

impl Sessions {
    fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.by_id.get(id).cloned()
    }
    fn insert(&mut self, session: Arc<Session>) {
        let Some(id) = session.id.clone() else { return };
        if self.by_id.len() >= MAX_SESSIONS {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
        if self.by_id.insert(id.clone(), session).is_none() {
            self.order.push_back(id);
        }
    }
    fn remove(&mut self, id: &str) {
        if self.by_id.remove(id).is_some() {
            self.order.retain(|s| s != id);
        }
    }
}

struct State {
    proxy: Proxy,
    pool: Arc<Pool>,
    sessions: Mutex<Sessions>,
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn plain(status: StatusCode, text: &'static str) -> Response<Out> {
    let mut r = Response::new(Out::full(text));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response<Out> {
    let mut r = Response::new(Out::full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Whether an `Origin` header, when present, names this machine (DNS-rebinding protection, as
/// the specification asks of servers).
fn origin_ok(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(hyper::header::ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if origin == "null" {
        return false;
    }
    let host = origin
        .split("://")
        .nth(1)
        .unwrap_or(origin)
        .split('/')
        .next()
        .unwrap_or("");
    let host = match host.rfind(':') {
        Some(i) if !host.ends_with(']') => &host[..i],
        _ => host,
    };
    matches!(host, "localhost" | "127.0.0.1" | "[::1]") || host.starts_with("127.")
}

/// A header value in the base64 sentinel form (`=?base64?…?=`) decoded; plain values as they are.
fn decode_header_value(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b64) => String::from_utf8(base64_decode(b64)?).ok(),
        None => Some(v.to_owned()),
    }
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        })
    };
    let bytes: Vec<u8> = s.bytes().filter(|b| *b != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= val(*c)? << (18 - 6 * i);
        }
        let take = match chunk.len() {
            4 => 3,
            3 => 2,
            2 => 1,
            _ => return None,
        };
        out.extend_from_slice(&n.to_be_bytes()[1..=take]);
    }
    Some(out)
}

use super::proxy::is_modern as mirrors_headers;

/// For a request the proxy acts on at a revision that mirrors the body in headers: the `400`
/// when they disagree.
fn header_mismatch(headers: &HeaderMap, body: &[u8]) -> Option<Response<Out>> {
    let head = peek(body)?;
    let method = head.method.as_deref()?;
    if method != "tools/call" {
        return None;
    }
    let meta_version = head.meta().protocol_version;
    let header_version = header(headers, VERSION_HEADER);
    let modern = header_version.is_some_and(mirrors_headers)
        || meta_version
            .as_ref()
            .and_then(Value::as_str)
            .is_some_and(mirrors_headers);
    if !modern {
        return None;
    }
    let what = if meta_version.as_ref().and_then(Value::as_str) != header_version {
        Some("MCP-Protocol-Version header does not match the request's _meta protocol version")
    } else if header(headers, METHOD_HEADER) != Some(method) {
        Some("Mcp-Method header does not match the request body's method")
    } else if head.name().is_some()
        && header(headers, NAME_HEADER).and_then(decode_header_value) != head.name()
    {
        Some("Mcp-Name header does not match the request body's name")
    } else {
        None
    };
    let what = what?;
    let answer = proxy::error_response(head.id.as_ref(), HEADER_MISMATCH, what);
    Some(json_response(StatusCode::BAD_REQUEST, answer))
}

/// Reads `body` whole, at most `bound` bytes; `Err(Some(n))` when it is larger (`n`: what was
/// read), `Err(None)` when it broke.
async fn read_bounded<B>(mut body: B, bound: usize) -> Result<Vec<u8>, Option<usize>>
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| None)?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > bound {
                return Err(Some(out.len() + data.len()));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// A JSON-RPC error answer with `data`.
fn error_body(id: Option<&Value>, code: i64, message: &str, data: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message, "data": data},
    }))
    .unwrap_or_default()
}

/// The `message` event carrying a JSON-RPC error answer.
fn error_event(id: &Value, code: i64, message: &str) -> Bytes {
    let body = error_body(Some(id), code, message, json!({}));
    let mut event = b"event: message\ndata: ".to_vec();
    event.extend_from_slice(&body);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

impl State {
    /// The answer to a request that passed `--call-timeout`: a JSON-RPC error, `200` so that
    /// the client's SDK hands it to the waiting call. Dropping the upstream exchange closes its
    /// connection (the cancellation of 2026-07-28; earlier revisions see the disconnect).
    fn timed_out(&self, pending: Option<Pending>, id: Option<&Value>) -> Response<Out> {
        let secs = self.proxy.call_timeout().map_or(0.0, |t| t.as_secs_f64());
        let why = format!("no response from the server within {secs} s (--call-timeout)");
        if let Some(p) = pending {
            self.proxy.abandon(p, &why, error_types::TIMEOUT);
        }
        log_line(
            "WARN",
            "A request passed its time; the client was answered with an error.",
            json!({"jsonrpc_id": proxy::log_id(id), "call_timeout_seconds": secs}),
        );
        let answer = error_body(
            id,
            codes::REQUEST_TIMEOUT,
            &format!("toolsize mcp: {why}"),
            json!({"call_timeout_seconds": secs}),
        );
        json_response(StatusCode::OK, answer)
    }

    fn session_for(&self, headers: &HeaderMap) -> Arc<Session> {
        match header(headers, SESSION_HEADER) {
            Some(id) => lock(&self.sessions)
                .get(id)
                .unwrap_or_else(|| Arc::new(Session::with_id(Some(id.to_owned())))),
            None => Arc::new(Session::default()),
        }
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Out> {
        let (parts, body) = match self.read_request(req).await {
            Ok(request) => request,
            Err(refused) => return refused,
        };
        let mut session = self.session_for(&parts.headers);
        let version = header(&parts.headers, VERSION_HEADER).map(str::to_owned);
        let (mut pending, request_id) = if parts.method == Method::POST {
            match self.admit(&parts.headers, &body, &session, version.as_deref()) {
                Ok(forwarded) => forwarded,
                Err(answered) => return *answered,
            }
        } else {
            (None, None)
        };
        let up = self.upstream_request(&parts, body);
        // The call's clock: the response's head for every request with an id, the whole
        // response for those acted on.
        let deadline = self
            .proxy
            .call_timeout()
            .filter(|_| request_id.is_some())
            .map(|t| tokio::time::Instant::now() + t);
        let (resp, lease) = match self
            .send_upstream(up, deadline, &mut pending, request_id.as_ref())
            .await
        {
            Ok(sent) => sent,
            Err(answered) => return answered,
        };
        self.follow_session(&parts, &resp, &mut session);

        let (mut head, body) = resp.into_parts();
        head.headers.retain_hop_by_hop();
        // A stream of the session (`GET`, resumed with `Last-Event-ID` up to 2025-11-25) may
        // carry the responses a broken `POST` stream did not: it is read for them.
        let orphans = if parts.method == Method::GET {
            session.take_orphans()
        } else {
            Vec::new()
        };
        let content_type = header(&head.headers, "content-type")
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("text/event-stream")
            && (pending.is_some() || !orphans.is_empty())
        {
            head.headers.remove(hyper::header::CONTENT_LENGTH);
            let (tx, rx) = mpsc::channel(16);
            let awaited: Vec<Pending> = pending.into_iter().chain(orphans).collect();
            // A `GET` stream lives as long as the session: only a `POST`'s own call has a clock.
            let deadline = deadline.filter(|_| parts.method == Method::POST);
            tokio::spawn(relay_events(
                self, session, version, body, lease, awaited, tx, deadline,
            ));
            return Response::from_parts(head, Out::Chan(rx));
        }
        session.keep_orphans(orphans);
        let Some(pending) = pending else {
            return Response::from_parts(head, Out::Relay(body, Some(lease)));
        };
        if !content_type.starts_with("application/json") {
            // No JSON-RPC answer (a 202, an HTML error page): the call ends without a result.
            self.proxy.http_failure(pending, head.status.as_u16());
            return Response::from_parts(head, Out::Relay(body, Some(lease)));
        }
        let (bytes, pending) = match self
            .read_answer(body, pending, request_id.as_ref(), deadline)
            .await
        {
            Ok(read) => read,
            Err(answered) => return answered,
        };
        lease.done();
        let Some((bytes, replaced)) = act(self, session, version, bytes, pending).await else {
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "toolsize mcp is stopping\n",
            );
        };
        let out = match replaced {
            Some(replaced) => {
                if let Ok(len) = HeaderValue::from_str(&replaced.len().to_string()) {
                    head.headers.insert(hyper::header::CONTENT_LENGTH, len);
                }
                replaced
            }
            None => bytes,
        };
        Response::from_parts(head, Out::full(out))
    }

    /// The request's head and body, read up to the proxy's maximum message size; a request to
    /// another path, from a foreign origin, over the size or broken is answered here.
    async fn read_request(
        &self,
        req: Request<Incoming>,
    ) -> Result<(hyper::http::request::Parts, Vec<u8>), Response<Out>> {
        if req.uri().path() != PATH {
            return Err(plain(
                StatusCode::NOT_FOUND,
                "toolsize mcp serves MCP at /mcp\n",
            ));
        }
        if !origin_ok(req.headers()) {
            return Err(plain(StatusCode::FORBIDDEN, "Origin not allowed\n"));
        }
        let (parts, body) = req.into_parts();
        let cap = self.proxy.max_message_bytes();
        match read_bounded(body, cap).await {
            Ok(body) => Ok((parts, body)),
            Err(Some(n)) => {
                log_line(
                    "WARN",
                    "A request from the client is over the maximum message size; it was refused.",
                    json!({"bytes_read": n, "max_message_bytes": cap}),
                );
                Err(plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request body over the proxy's maximum message size (--max-message-bytes)\n",
                ))
            }
            Err(None) => Err(plain(StatusCode::BAD_REQUEST, "request body broken\n")),
        }
    }

    /// A `POST`'s message through the proxy: answered here (a refused call, headers that do not
    /// match the body), or forwarded with the call it awaits and its JSON-RPC id (for the error
    /// a request gets when the server cannot be reached).
    fn admit(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        session: &Session,
        version: Option<&str>,
    ) -> Result<Forwarded, Box<Response<Out>>> {
        if let Some(refused) = header_mismatch(headers, body) {
            return Err(Box::new(refused));
        }
        let cx = Context {
            session,
            transport: "tcp",
            protocol_version: version,
        };
        match self.proxy.request(body, &cx) {
            Inbound::Answer(answer) => Err(Box::new(json_response(StatusCode::OK, answer))),
            Inbound::Forward(p) => Ok((p, peek(body).and_then(|h| h.id))),
        }
    }

    /// The request as sent upstream: the upstream's path and host, the client's headers but
    /// the hop-by-hop ones, its length and (on a `POST`, whose answer may be read) its
    /// `Accept-Encoding`.
    fn upstream_request(&self, parts: &hyper::http::request::Parts, body: Vec<u8>) -> Request<Out> {
        let mut up = Request::new(if body.is_empty() && parts.method != Method::POST {
            Out::empty()
        } else {
            Out::full(body)
        });
        *up.method_mut() = parts.method.clone();
        *up.uri_mut() = self
            .pool
            .upstream
            .path_and_query
            .parse()
            .unwrap_or_else(|_| hyper::Uri::from_static("/"));
        for (name, value) in &parts.headers {
            if is_hop_by_hop(name)
                || name == hyper::header::HOST
                || name == hyper::header::CONTENT_LENGTH
                || (parts.method == Method::POST && name == hyper::header::ACCEPT_ENCODING)
            {
                continue;
            }
            up.headers_mut().append(name.clone(), value.clone());
        }
        if let Ok(host) = HeaderValue::from_str(&self.pool.upstream.authority) {
            up.headers_mut().insert(hyper::header::HOST, host);
        }
        up
    }

    /// Sends the request upstream, within the call's clock when it has one; a timeout or an
    /// unreachable server is answered here with a JSON-RPC error.
    async fn send_upstream(
        &self,
        up: Request<Out>,
        deadline: Option<tokio::time::Instant>,
        pending: &mut Option<Pending>,
        request_id: Option<&Value>,
    ) -> Result<(Response<Incoming>, Lease), Response<Out>> {
        let sent = match deadline {
            Some(d) => match tokio::time::timeout_at(d, self.pool.send(up)).await {
                Ok(r) => r,
                Err(_) => return Err(self.timed_out(pending.take(), request_id)),
            },
            None => self.pool.send(up).await,
        };
        sent.map_err(|e| {
            log_line(
                "WARN",
                "The upstream server cannot be reached.",
                json!({"upstream": self.pool.upstream.redacted(), "error": e.to_string()}),
            );
            let answer = proxy::error_response(
                request_id,
                -32603,
                "toolsize mcp: the upstream server cannot be reached",
            );
            json_response(StatusCode::BAD_GATEWAY, answer)
        })
    }

    /// Keeps the session table in step with the server's answer: a session the client deleted
    /// leaves it, and a session the answer names (to `initialize`) takes what this exchange
    /// learnt.
    fn follow_session(
        &self,
        parts: &hyper::http::request::Parts,
        answer: &Response<Incoming>,
        session: &mut Arc<Session>,
    ) {
        if parts.method == Method::DELETE && answer.status().is_success() {
            if let Some(id) = header(&parts.headers, SESSION_HEADER) {
                lock(&self.sessions).remove(id);
            }
        }
        if session.id.is_none() {
            if let Some(id) = header(answer.headers(), SESSION_HEADER) {
                let named = Arc::new(Session::with_id(Some(id.chars().take(256).collect())));
                named.adopt(session);
                lock(&self.sessions).insert(Arc::clone(&named));
                *session = named;
            }
        }
    }

    /// The server's JSON answer to a call, read up to the maximum message size within the
    /// call's clock; a timeout, an oversized or a broken answer ends the call and is answered
    /// here with a JSON-RPC error.
    async fn read_answer(
        &self,
        body: Incoming,
        pending: Pending,
        request_id: Option<&Value>,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(Vec<u8>, Pending), Response<Out>> {
        let cap = self.proxy.max_message_bytes();
        let read = read_bounded(body, cap);
        let read = match deadline {
            Some(d) => match tokio::time::timeout_at(d, read).await {
                Ok(r) => r,
                Err(_) => return Err(self.timed_out(Some(pending), request_id)),
            },
            None => read.await,
        };
        match read {
            Ok(bytes) => Ok((bytes, pending)),
            Err(Some(n)) => {
                let why = format!("the server's response is over {cap} bytes, the proxy's maximum message size (--max-message-bytes)");
                self.proxy.abandon(pending, &why, error_types::TOO_LARGE);
                log_line(
                    "WARN",
                    "A response from the server is over the maximum message size; it was discarded and the client answered with an error.",
                    json!({"jsonrpc_id": proxy::log_id(request_id), "bytes_read": n, "max_message_bytes": cap}),
                );
                let answer = error_body(
                    request_id,
                    codes::MESSAGE_TOO_LARGE,
                    &format!("toolsize mcp: {why}; it was discarded"),
                    json!({"bytes_read": n, "max_message_bytes": cap}),
                );
                Err(json_response(StatusCode::OK, answer))
            }
            Err(None) => {
                let why = "the server's response broke off before its end";
                self.proxy.abandon(pending, why, error_types::SERVER_GONE);
                log_line(
                    "ERROR",
                    "The server's response broke off; the client was answered with an error.",
                    json!({"jsonrpc_id": proxy::log_id(request_id), "upstream": self.pool.upstream.redacted()}),
                );
                let answer = error_body(
                    request_id,
                    codes::CONNECTION_CLOSED,
                    &format!("toolsize mcp: {why}"),
                    json!({}),
                );
                Err(json_response(StatusCode::OK, answer))
            }
        }
    }
}

/// Hands a response to the proxy: inline when small, in the blocking pool when large. Returns
/// the response as it came and its replacement, if any.
async fn act(
    state: Arc<State>,
    session: Arc<Session>,
    version: Option<String>,
    bytes: Vec<u8>,
    pending: Pending,
) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let len = bytes.len();
    let run = move || {
        let cx = Context {
            session: &session,
            transport: "tcp",
            protocol_version: version.as_deref(),
        };
        let replaced = state.proxy.response(&bytes, pending, &cx);
        (bytes, replaced)
    };
    if len <= BLOCKING_BYTES {
        return Some(run());
    }
    // An error: the runtime is shutting down; the call ends cancelled.
    tokio::task::spawn_blocking(run).await.ok()
}

trait RetainHopByHop {
    fn retain_hop_by_hop(&mut self);
}

impl RetainHopByHop for HeaderMap {
    /// Removes the hop-by-hop headers.
    fn retain_hop_by_hop(&mut self) {
        let names: Vec<HeaderName> = self.keys().filter(|n| is_hop_by_hop(n)).cloned().collect();
        for n in names {
            self.remove(n);
        }
    }
}

/// Relays an event stream to the client as each event completes; the event carrying the
/// response to `pending` goes through the proxy. Stops, dropping the upstream body (which
/// closes its connection), when the client goes away. When the upstream stream breaks, ends
/// without the responses on a request without a session, or passes `deadline`, each response
/// still awaited is sent to the client as a JSON-RPC error event, and said on standard error.
#[allow(clippy::too_many_arguments)]
async fn relay_events(
    state: Arc<State>,
    session: Arc<Session>,
    version: Option<String>,
    mut body: Incoming,
    lease: Lease,
    mut pending: Vec<Pending>,
    tx: mpsc::Sender<Bytes>,
    deadline: Option<tokio::time::Instant>,
) {
    let mut splitter = Splitter::new(state.proxy.max_message_bytes());
    let mut complete = false;
    let mut failed: Option<(i64, &'static str, String)> = None;
    let timer = async move {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timer);
    loop {
        let frame = tokio::select! {
            f = body.frame() => f,
            () = tx.closed() => break,
            () = &mut timer, if !pending.is_empty() => {
                let secs = state.proxy.call_timeout().map_or(0.0, |t| t.as_secs_f64());
                failed = Some((
                    codes::REQUEST_TIMEOUT,
                    error_types::TIMEOUT,
                    format!("no response from the server within {secs} s (--call-timeout)"),
                ));
                break;
            }
        };
        let (chunk, more) = match frame {
            Some(Ok(f)) => match f.into_data() {
                Ok(d) => (d, true),
                Err(_) => continue,
            },
            Some(Err(_)) => {
                failed = Some((
                    codes::CONNECTION_CLOSED,
                    error_types::SERVER_GONE,
                    "the server's event stream broke off before the response".to_owned(),
                ));
                break;
            }
            None => {
                complete = true;
                (Bytes::new(), false)
            }
        };
        for piece in splitter.push(&chunk, more) {
            let out = match piece {
                Piece::Raw(raw) => raw,
                Piece::Event(event) if pending.is_empty() => event,
                Piece::Event(event) => {
                    act_on_event(&state, &session, &version, event, &mut pending).await
                }
            };
            if tx.send(Bytes::from(out)).await.is_err() {
                break;
            }
        }
        if !more {
            break;
        }
    }
    if complete {
        lease.done();
        if session.id.is_none() && !pending.is_empty() {
            failed = Some((
                codes::CONNECTION_CLOSED,
                error_types::SERVER_GONE,
                "the server ended its event stream without the response".to_owned(),
            ));
        }
    }
    if let Some((code, error_type, why)) = failed.filter(|_| !pending.is_empty() && !tx.is_closed())
    {
        log_line(
            "WARN",
            "Responses awaited on an event stream did not come; the client was answered with errors.",
            json!({"requests": pending.len(), "why": why}),
        );
        for p in pending.drain(..) {
            let id: Value = serde_json::from_str(&p.key).unwrap_or(Value::Null);
            state.proxy.abandon(p, &why, error_type);
            if tx
                .send(error_event(&id, code, &format!("toolsize mcp: {why}")))
                .await
                .is_err()
            {
                break;
            }
        }
    }
    // Responses that never came: a session keeps them for a resumed stream; otherwise (or past
    // its bound) their calls end as cancelled.
    if session.id.is_some() {
        session.keep_orphans(pending);
    }
}

/// An event while responses are awaited: handed to the proxy when it is one of them (which
/// then leaves `pending`), else relayed as it is.
async fn act_on_event(
    state: &Arc<State>,
    session: &Arc<Session>,
    version: &Option<String>,
    event: Vec<u8>,
    pending: &mut Vec<Pending>,
) -> Vec<u8> {
    let Some(data) = sse::data(&event) else {
        return event;
    };
    let key = peek(&data)
        .filter(|h| h.method.is_none())
        .and_then(|h| h.id)
        .map(|id| proxy::key_of(&id));
    let Some(at) = key.and_then(|k| pending.iter().position(|p| p.key == k)) else {
        return event;
    };
    let p = pending.swap_remove(at);
    let acted = act(
        Arc::clone(state),
        Arc::clone(session),
        version.clone(),
        data,
        p,
    )
    .await;
    match acted {
        Some((_, Some(replaced))) => sse::with_data(&event, &replaced),
        _ => event,
    }
}

/// Serves the proxy on `listener` until `shutdown` completes.
pub async fn serve(
    opts: Options,
    upstream: Upstream,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) {
    let state = Arc::new(State {
        proxy: Proxy::new(opts),
        pool: Arc::new(Pool {
            upstream,
            idle: Mutex::new(Vec::new()),
        }),
        sessions: Mutex::new(Sessions::default()),
    });
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&permits).acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => break,
        };
        let Ok((conn, _)) = accepted else {
            // Out of descriptors and the like: wait a moment rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = conn.set_nodelay(true);
        let state = Arc::clone(&state);
        tasks.spawn(async move {
            let _permit = permit;
            let svc = hyper::service::service_fn(move |req| {
                let state = Arc::clone(&state);
                async move { Ok::<_, Infallible>(state.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(conn), svc)
                .await;
        });
        while tasks.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    state.proxy.end_all();
}

/// Binds `listen`, says where on standard error, and serves until `SIGINT` or `SIGTERM`.
pub fn run(opts: Options, listen: SocketAddr, upstream: Upstream) -> Result<(), HttpError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(HttpError::Listen)?;
    rt.block_on(async move {
        let listener = TcpListener::bind(listen).await.map_err(HttpError::Listen)?;
        let addr = listener.local_addr().map_err(HttpError::Listen)?;
        log_line(
            "INFO",
            "Proxying MCP over Streamable HTTP.",
            json!({"listen": addr.to_string(), "path": PATH, "upstream": upstream.redacted()}),
        );
        serve(opts, upstream, listener, shutdown_signal()).await;
        Ok(())
    })
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls_are_checked_and_logged_without_secrets() {
        let u = Upstream::parse("http://127.0.0.1:9000/mcp?key=secret", None).unwrap();
        assert_eq!(u.redacted(), "http://127.0.0.1:9000/mcp");
        assert_eq!(u.path_and_query, "/mcp?key=secret");
        let e = Upstream::parse("http://user:pw@host/mcp", None).unwrap_err();
        assert!(!e.to_string().contains("pw"), "{e}");
        assert!(Upstream::parse("ftp://host/mcp", None).is_err());
        assert!(Upstream::parse("not a url", None).is_err());
    }

    #[test]
    fn origins_must_name_this_machine() {
        let with = |o: &str| {
            let mut h = HeaderMap::new();
            h.insert(hyper::header::ORIGIN, HeaderValue::from_str(o).unwrap());
            origin_ok(&h)
        };
        assert!(origin_ok(&HeaderMap::new()));
        assert!(with("http://localhost:6274"));
        assert!(with("http://127.0.0.1"));
        assert!(!with("https://evil.example"));
        assert!(!with("http://localhost.evil.example"));
    }

    #[test]
    fn base64_sentinels_are_decoded() {
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(),
            Some("Hello, 世界")
        );
        assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
    }

    #[test]
    fn modern_tool_calls_must_mirror_their_body() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let mut h = HeaderMap::new();
        h.insert(VERSION_HEADER, HeaderValue::from_static("2026-07-28"));
        h.insert(METHOD_HEADER, HeaderValue::from_static("tools/call"));
        h.insert(NAME_HEADER, HeaderValue::from_static("echo"));
        assert!(header_mismatch(&h, body).is_none());
        h.insert(NAME_HEADER, HeaderValue::from_static("other"));
        let r = header_mismatch(&h, body).unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        // An older revision mirrors nothing.
        let old = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
        let mut h = HeaderMap::new();
        h.insert(VERSION_HEADER, HeaderValue::from_static("2025-11-25"));
        assert!(header_mismatch(&h, old).is_none());
    }
}
