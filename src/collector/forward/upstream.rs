//! One upstream OTLP receiver: `http://host:port[/prefix]` (OTLP/HTTP: `POST
//! {prefix}/v1/traces`, `/v1/logs`, `/v1/metrics`, protobuf, as the OTLP exporters do with
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) or `grpc://host:port` (OTLP/gRPC, the three `Export` methods),
//! and one attempt to send it a request.
//!
//! Each worker keeps its own HTTP/1.1 connection (opened again after an error); the gRPC
//! upstream shares one HTTP/2 channel (tonic's, which reconnects by itself). The request bytes
//! are sent as received (decompressed, and converted from OTLP/JSON to protobuf when a client
//! sent JSON): never parsed again.

use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, Request, StatusCode};
use hyper_util::rt::TokioIo;
use prost::bytes::{Buf, Bytes};
use tokio::net::TcpStream;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

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
    /// OTLP/gRPC over a shared channel.
    Grpc { channel: Channel },
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

/// A worker's connection to an OTLP/HTTP upstream.
#[derive(Debug, Default)]
pub(super) struct Conn {
    http: Option<hyper::client::conn::http1::SendRequest<Body>>,
}

impl Conn {
    /// Drops the connection: the next attempt opens a new one.
    pub(super) fn reset(&mut self) {
        self.http = None;
    }
}

impl Upstream {
    /// The upstream of `url` (`http://` or `grpc://`). The gRPC channel connects when first
    /// used, so this needs a runtime but no network.
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
                let endpoint = Endpoint::from_shared(format!("http://{authority}"))
                    .map_err(|e| format!("{name}: {e}"))?
                    .connect_timeout(std::time::Duration::from_secs(5))
                    .tcp_nodelay(true)
                    // Export requests run to megabytes: windows that hold a few of them.
                    .initial_stream_window_size(Some(4 << 20))
                    .initial_connection_window_size(Some(16 << 20));
                let channel = if scheme == "grpcs" {
                    tls::channel(&endpoint, authority.clone(), host)
                        .map_err(|e| format!("{name}: {e}"))?
                } else {
                    endpoint.connect_lazy()
                };
                Kind::Grpc { channel }
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
            Kind::Grpc { channel } => self.export(channel.clone(), signal, body).await,
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
            let stream = match TcpStream::connect(authority).await {
                Ok(s) => s,
                Err(e) => return retry(format!("connect: {e}")),
            };
            let _ = stream.set_nodelay(true);
            let sender = match tls {
                None => handshake(stream).await,
                Some(host) => match tls::wrap(stream, host, false).await {
                    Ok(stream) => handshake(stream).await,
                    Err(e) => Err(e),
                },
            };
            match sender {
                Ok(sender) => conn.http = Some(sender),
                Err(e) => return retry(e),
            }
        }
        let Some(sender) = conn.http.as_mut() else {
            return retry("no connection".into());
        };
        if let Err(e) = sender.ready().await {
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
        let resp = match sender.send_request(req).await {
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
        let _ = http_body_util::BodyExt::collect(http_body_util::Limited::new(
            resp.into_body(),
            64 * 1024,
        ))
        .await;
        classify_http(status, after)
    }

    async fn export(&self, channel: Channel, signal: OtlpSignal, body: Bytes) -> Attempt {
        let mut grpc = tonic::client::Grpc::new(channel);
        if let Err(e) = grpc.ready().await {
            return Attempt::Retry {
                error: format!("connect: {e}"),
                after: None,
            };
        }
        let mut req = tonic::Request::new(body);
        for (k, v) in &self.headers {
            if let (Ok(k), Ok(v)) = (
                tonic::metadata::MetadataKey::from_bytes(k.as_str().as_bytes()),
                tonic::metadata::MetadataValue::try_from(v.as_bytes()),
            ) {
                req.metadata_mut().insert(k, v);
            }
        }
        let path = axum::http::uri::PathAndQuery::from_static(signal.grpc_path());
        match grpc.unary(req, path, BytesCodec).await {
            Ok(_) => Attempt::Sent,
            Err(status) => classify_grpc(&status),
        }
    }
}

/// An HTTP/1.1 connection over `io`, its driver spawned. Bodies are shared `Bytes`: written
/// with writev, never copied into hyper's buffer.
async fn handshake<T>(io: T) -> Result<hyper::client::conn::http1::SendRequest<Body>, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::Builder::new()
        .writev(true)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// TLS to `https://` and `grpcs://` upstreams, with the roots of the alert sinks
/// ([`crate::collector::net::client::tls_connector`]).
#[cfg(feature = "tls")]
mod tls {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use hyper_util::rt::TokioIo;
    use tokio::net::TcpStream;
    use tokio_rustls::client::TlsStream;
    use tonic::transport::{Channel, Endpoint, Uri};

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

    /// A lazy gRPC channel to `authority` over TLS checked against `host`.
    pub(super) fn channel(
        endpoint: &Endpoint,
        authority: String,
        host: String,
    ) -> Result<Channel, String> {
        crate::collector::net::client::tls_connector(true)?;
        Ok(endpoint.connect_with_connector_lazy(Connect { authority, host }))
    }

    /// Connects a TCP stream and shakes hands over TLS, for tonic's channel.
    #[derive(Clone)]
    struct Connect {
        authority: String,
        host: String,
    }

    impl tonic::codegen::Service<Uri> for Connect {
        type Response = TokioIo<TlsStream<TcpStream>>;
        type Error = std::io::Error;
        type Future =
            Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Uri) -> Self::Future {
            let Connect { authority, host } = self.clone();
            Box::pin(async move {
                let stream = TcpStream::connect(authority.as_str()).await?;
                let _ = stream.set_nodelay(true);
                wrap(stream, &host, true)
                    .await
                    .map(TokioIo::new)
                    .map_err(std::io::Error::other)
            })
        }
    }
}

/// Without the `tls` feature no `https://` nor `grpcs://` upstream passes the configuration.
#[cfg(not(feature = "tls"))]
mod tls {
    use tokio::net::TcpStream;
    use tonic::transport::{Channel, Endpoint};

    pub(super) async fn wrap(_: TcpStream, _: &str, _: bool) -> Result<TcpStream, String> {
        Err("TLS needs toolsize built with the `tls` feature".into())
    }

    pub(super) fn channel(_: &Endpoint, _: String, _: String) -> Result<Channel, String> {
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

/// Sends request bytes as they are and keeps the answer's bytes (not read).
#[derive(Debug, Clone, Copy, Default)]
struct BytesCodec;

impl Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;

    fn encoder(&mut self) -> Self::Encoder {
        BytesCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        BytesCodec
    }
}

impl Encoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        prost::bytes::BufMut::put(dst, item);
        Ok(())
    }
}

impl Decoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
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
