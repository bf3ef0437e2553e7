//! An `http://` or `https://` target, as the alert sinks (and `toolsize demo`'s agent and
//! `toolsize hook`) post to it; parsed once when the configuration is loaded, so a bad URL is a
//! configuration error, never a failed post.
//!
//! `https` (feature `tls`) checks the server against Mozilla's roots (built in) and the
//! system's store; `SSL_CERT_FILE` / `SSL_CERT_DIR`, when set, take the system store's place, as
//! they do for OpenSSL. The roots are read once, when the first `https` URL is parsed: a
//! variable naming a file that cannot be read, or that holds no certificate, makes that URL a
//! configuration error. A handshake that fails (unknown issuer, wrong name, expired) is a failed
//! post, named in the error; callers bound the time a post may take, handshake included.
//!
//! `toolsize top` and `toolsize doctor` read a daemon's API through [`Target::get`], over the same
//! connections (TLS included).
//!
//! Error messages name a URL by its scheme and authority only: a webhook's path often holds its
//! key (Slack, relays), and a message must not leak it.

use axum::body::{Body, Bytes};
use axum::http::{header, Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Why an exchange with a [`Target`] failed.
#[derive(Debug)]
pub(crate) enum ClientError {
    /// The TCP connection could not be made.
    Connect(std::io::Error),
    /// What came after the connection: the TLS handshake, the exchange or the answer.
    Exchange(String),
}

impl ClientError {
    /// Whether nothing could be reached at the address (connection refused, host or network
    /// unreachable): the peer is not running or the address is wrong, unlike a failed TLS
    /// handshake or a broken answer.
    pub(crate) fn unreachable(&self) -> bool {
        use std::io::ErrorKind;
        matches!(self, ClientError::Connect(e) if matches!(
            e.kind(),
            ErrorKind::ConnectionRefused | ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable
        ))
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Connect(e) => write!(f, "{e}"),
            ClientError::Exchange(e) => f.write_str(e),
        }
    }
}

/// An `http://` or `https://` `host:port/path` target. Its `Debug` shows the origin only (the
/// path may be a key).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `host:port`.
    pub(crate) authority: String,
    /// Path and query.
    pub(crate) path: String,
    /// The host, for the TLS server name.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    host: String,
    /// Whether the target is `https`.
    tls: bool,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Target({})", self.origin())
    }
}

/// `scheme://authority` of `url`, or `"the URL"` when it has none: what an error may show.
pub(crate) fn redacted(url: &str) -> String {
    match url.parse::<Uri>() {
        Ok(u) => match (u.scheme_str(), u.host()) {
            (Some(s), Some(h)) => match u.port_u16() {
                Some(p) => format!("{s}://{h}:{p}"),
                None => format!("{s}://{h}"),
            },
            _ => "the URL".into(),
        },
        Err(_) => "the URL".into(),
    }
}

impl Target {
    /// Parses an `http://` or (with the `tls` feature) `https://` URL; other schemes are errors.
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let shown = redacted(url);
        let uri: Uri = url.parse().map_err(|e| format!("{shown}: {e}"))?;
        let (tls, default_port) = match uri.scheme_str() {
            Some("http") => (false, 80),
            Some("https") if cfg!(feature = "tls") => (true, 443),
            Some("https") => {
                return Err(format!(
                    "{shown}: https:// needs toolsize built with the `tls` feature"
                ))
            }
            _ => {
                return Err(format!(
                    "{shown}: only http:// and https:// URLs are supported"
                ))
            }
        };
        let host = uri.host().ok_or_else(|| format!("{shown}: no host"))?;
        #[cfg(feature = "tls")]
        if tls {
            roots::connector().map_err(|e| format!("{shown}: {e}"))?;
        }
        let port = uri.port_u16().unwrap_or(default_port);
        // An IPv6 literal keeps its brackets in `host()`; the server name wants it bare.
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        Ok(Self {
            authority: format!("{host}:{port}"),
            path: uri
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "/".into()),
            host: bare.to_string(),
            tls,
        })
    }

    /// `http://{addr}{path}`.
    pub(crate) fn http(addr: std::net::SocketAddr, path: &str) -> Self {
        Self {
            authority: addr.to_string(),
            path: path.into(),
            host: addr.ip().to_string(),
            tls: false,
        }
    }

    /// POSTs `body` on a new HTTP/1.1 connection with an optional bearer token; a non-2xx
    /// answer is an error naming the status. Callers bound the time it may take.
    pub(crate) async fn post(
        &self,
        content_type: &str,
        token: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(), String> {
        let req = self
            .request(Method::POST, token)
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .map_err(|e| e.to_string())?;
        let (status, _) = self.send(req, None).await.map_err(|e| e.to_string())?;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("HTTP {status}"))
        }
    }

    /// GETs the target on a new HTTP/1.1 connection with an optional bearer token: the
    /// answer's status and body, a body over `max_body` bytes an error. Callers bound the time
    /// it may take.
    pub(crate) async fn get(
        &self,
        accept: &str,
        token: Option<&str>,
        max_body: usize,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let req = self
            .request(Method::GET, token)
            .header(header::ACCEPT, accept)
            .body(Body::empty())
            .map_err(|e| ClientError::Exchange(e.to_string()))?;
        self.send(req, Some(max_body)).await
    }

    /// A request to the target's path with its `Host`, the user agent and the token.
    fn request(&self, method: Method, token: Option<&str>) -> axum::http::request::Builder {
        let req = Request::builder()
            .method(method)
            .uri(self.path.as_str())
            .header(header::HOST, self.authority.as_str())
            .header(
                header::USER_AGENT,
                concat!("toolsize/", env!("CARGO_PKG_VERSION")),
            );
        match token {
            Some(t) => req.header(header::AUTHORIZATION, format!("Bearer {t}")),
            None => req,
        }
    }

    /// Sends `req` on a new connection (TLS for `https`); reads the answer's body when
    /// `max_body` is given.
    async fn send(
        &self,
        req: Request<Body>,
        max_body: Option<usize>,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let stream = TcpStream::connect(self.authority.as_str())
            .await
            .map_err(ClientError::Connect)?;
        let _ = stream.set_nodelay(true);
        if self.tls {
            #[cfg(feature = "tls")]
            {
                let connector = roots::connector().map_err(ClientError::Exchange)?;
                let name =
                    rustls_pki_types::ServerName::try_from(self.host.clone()).map_err(|e| {
                        ClientError::Exchange(format!("TLS server name {:?}: {e}", self.host))
                    })?;
                let tls = connector
                    .connect(name, stream)
                    .await
                    .map_err(|e| ClientError::Exchange(format!("TLS handshake: {e}")))?;
                return exchange(tls, req, max_body)
                    .await
                    .map_err(ClientError::Exchange);
            }
        }
        exchange(stream, req, max_body)
            .await
            .map_err(ClientError::Exchange)
    }

    /// The same host with `suffix` appended to its path (a base URL's API endpoint).
    #[must_use]
    pub(crate) fn with_path(mut self, suffix: &str) -> Self {
        self.path = format!("{}{suffix}", self.path.trim_end_matches('/'));
        self
    }

    /// `scheme://host:port`, for logs.
    pub(crate) fn origin(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.authority)
    }
}

/// One request and its answer on `stream`, an HTTP/1.1 connection of hyper's client.
async fn exchange<S>(
    stream: S,
    req: Request<Body>,
    max_body: Option<usize>,
) -> Result<(StatusCode, Bytes), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let Some(max) = max_body else {
        return Ok((status, Bytes::new()));
    };
    let body = http_body_util::Limited::new(resp.into_body(), max);
    match http_body_util::BodyExt::collect(body).await {
        Ok(b) => Ok((status, b.to_bytes())),
        Err(e) => Err(format!("the answer: {e}")),
    }
}

/// The TLS connector of `https://` (HTTP/1.1) or, with `h2`, `grpcs://` (HTTP/2) peers: the
/// roots every outbound connection is checked against, read once (see the module docs).
#[cfg(feature = "tls")]
pub(crate) fn tls_connector(h2: bool) -> Result<tokio_rustls::TlsConnector, String> {
    if h2 {
        roots::connector_h2()
    } else {
        roots::connector()
    }
}

/// The roots `https` targets are checked against, read once.
#[cfg(feature = "tls")]
pub(crate) mod roots {
    use std::sync::{Arc, OnceLock};

    use tokio_rustls::rustls;
    use tokio_rustls::TlsConnector;

    static CONNECTOR: OnceLock<Result<TlsConnector, String>> = OnceLock::new();
    static CONNECTOR_H2: OnceLock<Result<TlsConnector, String>> = OnceLock::new();

    /// The connector of every `https` target (HTTP/1.1), built on first use.
    pub(super) fn connector() -> Result<TlsConnector, String> {
        CONNECTOR.get_or_init(|| build(b"http/1.1")).clone()
    }

    /// The same roots for HTTP/2 (gRPC) targets.
    pub(super) fn connector_h2() -> Result<TlsConnector, String> {
        CONNECTOR_H2.get_or_init(|| build(b"h2")).clone()
    }

    fn build(alpn: &[u8]) -> Result<TlsConnector, String> {
        let mut roots = mozilla();
        let from_env: Vec<String> = ["SSL_CERT_FILE", "SSL_CERT_DIR"]
            .into_iter()
            .filter_map(|v| std::env::var_os(v).map(|p| format!("{v}={}", p.to_string_lossy())))
            .collect();
        let native = rustls_native_certs::load_native_certs();
        if !from_env.is_empty() {
            // Roots the operator named must all be read: a typo must not fall back silently.
            if let Some(e) = native.errors.first() {
                return Err(format!("{}: {e}", from_env.join(", ")));
            }
            if native.certs.is_empty() {
                return Err(format!("{}: no certificate in it", from_env.join(", ")));
            }
        }
        // The system store's unreadable entries are skipped: Mozilla's roots remain.
        roots.add_parsable_certificates(native.certs);
        connector_with(roots, alpn)
    }

    /// Mozilla's roots, to which a caller adds its own.
    pub(crate) fn mozilla() -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        roots
    }

    /// The one client set-up of every outbound TLS connection (the daemon's and `toolsize
    /// mcp`'s): ring, the safe protocol versions, `roots`, no client certificate, one ALPN
    /// protocol.
    pub(crate) fn connector_with(
        roots: rustls::RootCertStore,
        alpn: &[u8],
    ) -> Result<TlsConnector, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(TlsConnector::from(Arc::new(config)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = Target::parse("http://127.0.0.1:9093").unwrap();
        assert_eq!(t.authority, "127.0.0.1:9093");
        assert_eq!(t.with_path("/api/v2/alerts").path, "/api/v2/alerts");
        let t = Target::parse("http://am.local/prefix/").unwrap();
        assert_eq!(t.authority, "am.local:80");
        assert_eq!(t.origin(), "http://am.local:80");
        assert_eq!(t.with_path("/api/v2/alerts").path, "/prefix/api/v2/alerts");
        assert!(Target::parse("not a url").is_err());
        assert!(Target::parse("ftp://am.local").is_err());
    }

    #[cfg(feature = "tls")]
    #[test]
    fn https_targets() {
        let t = Target::parse("https://hooks.example.com/services/T0/B0/k3y").unwrap();
        assert_eq!(t.authority, "hooks.example.com:443");
        assert_eq!(t.origin(), "https://hooks.example.com:443");
        assert_eq!(t.path, "/services/T0/B0/k3y");
    }

    #[test]
    fn errors_never_show_the_path() {
        let e = Target::parse("ftp://hooks.example.com/services/k3y").unwrap_err();
        assert!(e.starts_with("ftp://hooks.example.com:"), "{e}");
        assert!(!e.contains("k3y"), "{e}");
        let e = Target::parse("http:///k3y").unwrap_err();
        assert!(!e.contains("k3y"), "{e}");
        let t = Target::parse("http://hooks.example.com/services/k3y").unwrap();
        assert_eq!(format!("{t:?}"), "Target(http://hooks.example.com:80)");
    }
}
