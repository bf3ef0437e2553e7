//! One upstream OTLP receiver: `http(s)://host:port[/prefix]` (OTLP/HTTP: `POST
//! {prefix}/v1/traces`, `/v1/logs`, `/v1/metrics`, protobuf, as the OTLP exporters do with
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) or `grpc(s)://host:port` (OTLP/gRPC, the three `Export`
//! methods), and one attempt to send it a request.
//!
//! Each worker keeps its own connection, HTTP/1.1 or HTTP/2, opened again after an error. The
//! request bytes are sent as received (decompressed, and converted from OTLP/JSON to protobuf
//! when a client sent JSON), shared, never copied nor parsed again: over gRPC they go as one
//! message after its 5-byte prefix, on hyper's HTTP/2 client (tonic's client would copy each
//! request into its frame buffer: `scripts/bench-forward.sh` measured that copy at a fifth of
//! the daemon's CPU per span), the status read from `grpc-status`.

use std::future::Future;

use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, Request, StatusCode};
use hyper_util::rt::TokioIo;
use prost::bytes::Bytes;
use tokio::net::TcpStream;
use tonic::{Code, Status};

use super::coalesce::{Coalesce, Lent};
use super::drive::{Drivers, InTask};
use crate::collector::config::otlp_upstream;
use crate::collector::stats::OtlpSignal;

/// What one attempt came to.
#[derive(Debug)]
pub(super) enum Attempt {
    /// The upstream took it.
    Sent,
    /// It failed in a way OTLP says to retry, after `after` when the server said.
    Retry {
        error: String,
        after: Option<std::time::Duration>,
    },
    /// The upstream refused it for good.
    Refused(String),
}

/// How to reach the upstream.
#[derive(Debug)]
enum Kind {
    /// OTLP/HTTP: `host:port`, the path prefix the signal paths go under, and the TLS server
    /// name for `https`.
    Http {
        authority: String,
        prefix: String,
        tls: Option<String>,
    },
    /// OTLP/gRPC: `host:port` and the TLS server name for `grpcs`.
    Grpc {
        authority: String,
        tls: Option<String>,
    },
}

/// One upstream receiver.
#[derive(Debug)]
pub(crate) struct Upstream {
    kind: Kind,
    /// `scheme://host:port`, as shown.
    name: String,
    /// Sent with every request.
    headers: Vec<(HeaderName, HeaderValue)>,
}

/// A worker's connection to its upstream, HTTP/1.1 or HTTP/2, and the futures that drive it,
/// polled by the worker itself ([`Drivers`]).
#[derive(Default)]
pub(super) struct Conn {
    http: Option<hyper::client::conn::http1::SendRequest<Body>>,
    h2: Option<hyper::client::conn::http2::SendRequest<GrpcBody>>,
    /// The messages the HTTP/2 connection is sending, written from where they are.
    lent: Lent,
    drivers: Drivers,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("http", &self.http.is_some())
            .field("h2", &self.h2.is_some())
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// Drops the connection: the next attempt opens a new one.
    pub(super) fn reset(&mut self) {
        self.http = None;
        self.h2 = None;
        self.lent = Lent::default();
        self.drivers = Drivers::default();
    }

    /// Awaits `fut` while keeping the connection driven (an upstream closing an idle
    /// connection is noticed before the next request).
    pub(super) async fn idle<F: Future>(&mut self, fut: F) -> F::Output {
        self.drivers.drive(fut).await
    }
}

impl Upstream {
    /// The upstream of `url` (`http(s)://` or `grpc(s)://`); nothing connects before the first
    /// request.
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let (scheme, authority, prefix) = otlp_upstream(url)?;
        let name = format!("{scheme}://{authority}");
        let host = authority
            .rsplit_once(':')
            .map_or(authority.as_str(), |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let kind = match scheme {
            "grpc" | "grpcs" => {
                let tls = (scheme == "grpcs").then_some(host);
                #[cfg(feature = "tls")]
                if tls.is_some() {
                    crate::collector::net::client::tls_connector(true)
                        .map_err(|e| format!("{name}: {e}"))?;
                }
                Kind::Grpc { authority, tls }
            }
            _ => {
                let tls = (scheme == "https").then_some(host);
                #[cfg(feature = "tls")]
                if tls.is_some() {
                    crate::collector::net::client::tls_connector(false)
                        .map_err(|e| format!("{name}: {e}"))?;
                }
                Kind::Http {
                    authority,
                    prefix,
                    tls,
                }
            }
        };
        Ok(Self {
            kind,
            name,
            headers: Vec::new(),
        })
    }

    /// The same, sending `headers` with every request.
    #[must_use]
    pub(crate) fn with_headers(mut self, headers: Vec<(HeaderName, HeaderValue)>) -> Self {
        self.headers = headers;
        self
    }

    /// `scheme://host:port`.
    pub(crate) fn name(&self) -> String {
        self.name.clone()
    }

    /// `http` or `grpc`.
    pub(crate) fn protocol(&self) -> &'static str {
        match self.kind {
            Kind::Http { tls: None, .. } => "http",
            Kind::Http { .. } => "https",
            Kind::Grpc { .. } => "grpc",
        }
    }

    /// One attempt to send `body`, an export request of `signal`.
    pub(super) async fn send(&self, conn: &mut Conn, signal: OtlpSignal, body: Bytes) -> Attempt {
        match &self.kind {
            Kind::Http {
                authority,
                prefix,
                tls,
            } => {
                let path = format!("{prefix}{}", signal.http_path());
                let attempt = self
                    .post(conn, authority, tls.as_deref(), &path, body)
                    .await;
                if !matches!(attempt, Attempt::Sent) {
                    conn.reset();
                }
                attempt
            }
            Kind::Grpc { authority, tls } => {
                let attempt = self
                    .export(conn, authority, tls.as_deref(), signal, body)
                    .await;
                if matches!(attempt, Attempt::Retry { .. }) {
                    conn.reset();
                }
                attempt
            }
        }
    }

    async fn post(
        &self,
        conn: &mut Conn,
        authority: &str,
        tls: Option<&str>,
        path: &str,
        body: Bytes,
    ) -> Attempt {
        let retry = |error: String| Attempt::Retry { error, after: None };
        if conn.http.as_ref().is_none_or(|s| s.is_closed()) {
            conn.reset();
            match open(authority, tls, false).await {
                Ok(io) => match handshake(io).await {
                    Ok((sender, drivers)) => {
                        conn.http = Some(sender);
                        conn.drivers = drivers;
                    }
                    Err(e) => return retry(e),
                },
                Err(e) => return retry(e),
            }
        }
        let Conn {
            http: Some(sender),
            drivers,
            ..
        } = conn
        else {
            return retry("no connection".into());
        };
        if let Err(e) = drivers.drive(sender.ready()).await {
            return retry(e.to_string());
        }
        let mut req = Request::post(path)
            .header(header::HOST, authority)
            .header(header::CONTENT_TYPE, "application/x-protobuf")
            .header(
                header::USER_AGENT,
                concat!("toolsize/", env!("CARGO_PKG_VERSION")),
            );
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        let req = match req.body(Body::from(body)) {
            Ok(r) => r,
            Err(e) => return Attempt::Refused(e.to_string()),
        };
        let resp = match drivers.drive(sender.send_request(req)).await {
            Ok(r) => r,
            Err(e) => return retry(e.to_string()),
        };
        let status = resp.status();
        let after = resp
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(std::time::Duration::from_secs);
        // Read the (small) answer so the connection can carry the next request.
        let answer = http_body_util::BodyExt::collect(http_body_util::Limited::new(
            resp.into_body(),
            64 * 1024,
        ));
        let _ = drivers.drive(answer).await;
        classify_http(status, after)
    }

    /// One OTLP/gRPC `Export` call: the request bytes framed as one gRPC message (5 bytes of
    /// prefix, then the shared bytes, not copied) on the worker's HTTP/2 connection, its
    /// `grpc-status` read from the trailers (or the headers of a trailers-only answer).
    async fn export(
        &self,
        conn: &mut Conn,
        authority: &str,
        tls: Option<&str>,
        signal: OtlpSignal,
        body: Bytes,
    ) -> Attempt {
        let retry = |error: String| Attempt::Retry { error, after: None };
        if conn.h2.as_ref().is_none_or(|s| s.is_closed()) {
            conn.reset();
            match open(authority, tls, true).await {
                // Its DATA frames gathered into few writes ([`super::coalesce`]).
                Ok(io) => match handshake_h2(Coalesce::new(io, conn.lent.clone())).await {
                    Ok((sender, drivers)) => {
                        conn.h2 = Some(sender);
                        conn.drivers = drivers;
                    }
                    Err(e) => return retry(e),
                },
                Err(e) => return retry(e),
            }
        }
        let Conn {
            h2: Some(sender),
            lent,
            drivers,
            ..
        } = conn
        else {
            return retry("no connection".into());
        };
        if let Err(e) = drivers.drive(sender.ready()).await {
            return retry(e.to_string());
        }
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut req = Request::post(format!("{scheme}://{authority}{}", signal.grpc_path()))
            .header(header::CONTENT_TYPE, "application/grpc")
            .header(header::TE, "trailers")
            .header(
                header::USER_AGENT,
                concat!("toolsize/", env!("CARGO_PKG_VERSION")),
            );
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        // Until the answer, the message's frames are written from its bytes, not copied.
        let _lending = lent.lend(&body);
        let req = match req.body(GrpcBody::new(body)) {
            Ok(r) => r,
            Err(e) => return Attempt::Refused(e.to_string()),
        };
        let resp = match drivers.drive(sender.send_request(req)).await {
            Ok(r) => r,
            Err(e) => return retry(e.to_string()),
        };
        if resp.status() != StatusCode::OK {
            return classify_http(resp.status(), None);
        }
        let (parts, mut answer) = resp.into_parts();
        let mut status = grpc_status(&parts.headers);
        // The (small) answer, read to its trailers.
        let mut read = 0usize;
        while let Some(frame) = drivers
            .drive(http_body_util::BodyExt::frame(&mut answer))
            .await
        {
            let frame = match frame {
                Ok(f) => f,
                Err(e) => return retry(e.to_string()),
            };
            if let Some(t) = frame.trailers_ref() {
                status = status.or_else(|| grpc_status(t));
            } else if let Some(d) = frame.data_ref() {
                read += d.len();
                if read > 1 << 20 {
                    break;
                }
            }
        }
        match status {
            Some(s) if s.code() == Code::Ok => Attempt::Sent,
            Some(s) => classify_grpc(&s),
            None => retry("answer without grpc-status".into()),
        }
    }
}

/// The `grpc-status` (and `grpc-message`) of an answer's headers or trailers.
fn grpc_status(h: &axum::http::HeaderMap) -> Option<Status> {
    let code: i32 = h.get("grpc-status")?.to_str().ok()?.trim().parse().ok()?;
    let message = h
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or_default();
    Some(Status::new(Code::from_i32(code), message))
}

/// One gRPC message as a request body: its 5-byte prefix (not compressed, length) and the
/// message, two frames, the message's bytes shared.
#[derive(Debug)]
pub(super) struct GrpcBody {
    frames: [Option<Bytes>; 2],
}

impl GrpcBody {
    fn new(message: Bytes) -> Self {
        let mut prefix = [0u8; 5];
        // Requests are bounded by `otlp.max_request_bytes` (at most a few hundred MB).
        let len = u32::try_from(message.len()).unwrap_or(u32::MAX);
        prefix[1..].copy_from_slice(&len.to_be_bytes());
        Self {
            frames: [Some(Bytes::copy_from_slice(&prefix)), Some(message)],
        }
    }
}

impl http_body::Body for GrpcBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let next = self.frames.iter_mut().find_map(Option::take);
        std::task::Poll::Ready(next.map(|b| Ok(http_body::Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.frames.iter().all(Option::is_none)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let n: usize = self.frames.iter().flatten().map(Bytes::len).sum();
        http_body::SizeHint::with_exact(n as u64)
    }
}

/// An HTTP/2 connection over `io` (windows that hold a few export requests, which run to
/// megabytes), and its futures, for the worker to poll.
async fn handshake_h2<T>(
    io: T,
) -> Result<(hyper::client::conn::http2::SendRequest<GrpcBody>, Drivers), String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let exec = InTask::default();
    let (sender, connection) = hyper::client::conn::http2::Builder::new(exec.clone())
        .initial_stream_window_size(4 << 20)
        .initial_connection_window_size(16 << 20)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    Ok((sender, Drivers::new(connection, exec)))
}

/// A connection's byte stream: TCP, or TLS over it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A TCP connection to `authority`, with a TLS handshake with `tls` when given (ALPN `h2`
/// when `h2`).
async fn open(authority: &str, tls: Option<&str>, h2: bool) -> Result<Box<dyn Io>, String> {
    let stream = TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    Ok(match tls {
        None => Box::new(stream),
        Some(host) => Box::new(tls::wrap(stream, host, h2).await?),
    })
}

/// An HTTP/1.1 connection over `io`, and its future, for the worker to poll. Bodies are shared
/// `Bytes`: written with writev, never copied into hyper's buffer.
async fn handshake<T>(
    io: T,
) -> Result<(hyper::client::conn::http1::SendRequest<Body>, Drivers), String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::Builder::new()
        .writev(true)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    Ok((sender, Drivers::new(connection, InTask::default())))
}

/// TLS to `https://` and `grpcs://` upstreams, with the roots of the alert sinks
/// ([`crate::collector::net::client::tls_connector`]).
#[cfg(feature = "tls")]
mod tls {
    use tokio::net::TcpStream;
    use tokio_rustls::client::TlsStream;

    /// `stream` after a TLS handshake with `host` (ALPN `h2` when `h2`).
    pub(super) async fn wrap(
        stream: TcpStream,
        host: &str,
        h2: bool,
    ) -> Result<TlsStream<TcpStream>, String> {
        let connector = crate::collector::net::client::tls_connector(h2)?;
        let name = rustls_pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| format!("TLS server name {host:?}: {e}"))?;
        connector
            .connect(name, stream)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))
    }
}

/// Without the `tls` feature no `https://` nor `grpcs://` upstream passes the configuration.
#[cfg(not(feature = "tls"))]
mod tls {
    use tokio::net::TcpStream;

    pub(super) async fn wrap(_: TcpStream, _: &str, _: bool) -> Result<TcpStream, String> {
        Err("TLS needs toolsize built with the `tls` feature".into())
    }
}

/// OTLP/HTTP: 2xx sent; 429, 502, 503 and 504 retried (after `Retry-After` when given); any
/// other status refused for good.
fn classify_http(status: StatusCode, after: Option<std::time::Duration>) -> Attempt {
    if status.is_success() {
        return Attempt::Sent;
    }
    let error = format!("HTTP {status}");
    match status.as_u16() {
        429 | 502 | 503 | 504 => Attempt::Retry { error, after },
        _ => Attempt::Refused(error),
    }
}

/// OTLP/gRPC: the retryable codes of the specification retried; any other refused for good.
fn classify_grpc(status: &Status) -> Attempt {
    let error = format!("gRPC {:?}: {}", status.code(), status.message());
    match status.code() {
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::Cancelled
        | Code::OutOfRange
        | Code::DataLoss => Attempt::Retry { error, after: None },
        _ => Attempt::Refused(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_as_otlp_says() {
        assert!(matches!(classify_http(StatusCode::OK, None), Attempt::Sent));
        for s in [429, 502, 503, 504] {
            let s = StatusCode::from_u16(s).unwrap();
            assert!(
                matches!(classify_http(s, None), Attempt::Retry { .. }),
                "{s}"
            );
        }
        for s in [400, 401, 404, 413, 500] {
            let s = StatusCode::from_u16(s).unwrap();
            assert!(matches!(classify_http(s, None), Attempt::Refused(_)), "{s}");
        }
        assert!(matches!(
            classify_grpc(&Status::unavailable("x")),
            Attempt::Retry { .. }
        ));
        assert!(matches!(
            classify_grpc(&Status::invalid_argument("x")),
            Attempt::Refused(_)
        ));
    }
}
