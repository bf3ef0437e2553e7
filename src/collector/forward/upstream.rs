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
    /// OTLP/HTTP: `host:port` and the path prefix the signal paths go under.
    Http { authority: String, prefix: String },
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
        let kind = match scheme {
            "grpc" => {
                let endpoint = Endpoint::from_shared(format!("http://{authority}"))
                    .map_err(|e| format!("{name}: {e}"))?
                    .connect_timeout(std::time::Duration::from_secs(5))
                    .tcp_nodelay(true)
                    // Export requests run to megabytes: windows that hold a few of them.
                    .initial_stream_window_size(Some(4 << 20))
                    .initial_connection_window_size(Some(16 << 20));
                Kind::Grpc {
                    channel: endpoint.connect_lazy(),
                }
            }
            _ => Kind::Http { authority, prefix },
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
            Kind::Http { .. } => "http",
            Kind::Grpc { .. } => "grpc",
        }
    }

    /// One attempt to send `body`, an export request of `signal`.
    pub(super) async fn send(&self, conn: &mut Conn, signal: OtlpSignal, body: Bytes) -> Attempt {
        match &self.kind {
            Kind::Http { authority, prefix } => {
                let path = format!("{prefix}{}", signal.http_path());
                let attempt = self.post(conn, authority, &path, body).await;
                if !matches!(attempt, Attempt::Sent) {
                    conn.reset();
                }
                attempt
            }
            Kind::Grpc { channel } => self.export(channel.clone(), signal, body).await,
        }
    }

    async fn post(&self, conn: &mut Conn, authority: &str, path: &str, body: Bytes) -> Attempt {
        let retry = |error: String| Attempt::Retry { error, after: None };
        if conn.http.as_ref().is_none_or(|s| s.is_closed()) {
            let stream = match TcpStream::connect(authority).await {
                Ok(s) => s,
                Err(e) => return retry(format!("connect: {e}")),
            };
            let _ = stream.set_nodelay(true);
            // Bodies are shared `Bytes`: written with writev, never copied into hyper's buffer.
            let (sender, connection) = match hyper::client::conn::http1::Builder::new()
                .writev(true)
                .handshake(TokioIo::new(stream))
                .await
            {
                Ok(x) => x,
                Err(e) => return retry(format!("handshake: {e}")),
            };
            tokio::spawn(async move {
                let _ = connection.await;
            });
            conn.http = Some(sender);
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
