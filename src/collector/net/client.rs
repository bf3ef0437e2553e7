//! An `http://host:port/path` target, as the alert sinks (and `toolsize demo`'s agent) post to
//! it; parsed once when the configuration is loaded, so a bad URL is a configuration error,
//! never a failed post.

use axum::body::Body;
use axum::http::{header, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// An `http://host:port/path` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `host:port`.
    pub(crate) authority: String,
    /// Path and query.
    pub(crate) path: String,
}

impl Target {
    /// Parses an `http://` URL; other schemes are errors.
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let uri: Uri = url.parse().map_err(|e| format!("{url:?}: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!("{url:?}: only http:// URLs are supported"));
        }
        let host = uri.host().ok_or_else(|| format!("{url:?}: no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        Ok(Self {
            authority: format!("{host}:{port}"),
            path: uri
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "/".into()),
        })
    }

    /// POSTs `body` on a new HTTP/1.1 connection with an optional bearer token; a non-2xx
    /// answer is an error naming the status. Callers bound the time it may take.
    pub(crate) async fn post(
        &self,
        content_type: &str,
        token: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(), String> {
        let stream = TcpStream::connect(self.authority.as_str())
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = Request::post(self.path.as_str())
            .header(header::HOST, self.authority.as_str())
            .header(header::CONTENT_TYPE, content_type)
            .header(
                header::USER_AGENT,
                concat!("toolsize/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(t) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req.body(Body::from(body)).map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(format!("HTTP {}", resp.status()))
        }
    }

    /// The same host with `suffix` appended to its path (a base URL's API endpoint).
    #[must_use]
    pub(crate) fn with_path(mut self, suffix: &str) -> Self {
        self.path = format!("{}{suffix}", self.path.trim_end_matches('/'));
        self
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
        assert_eq!(t.with_path("/api/v2/alerts").path, "/prefix/api/v2/alerts");
        assert!(Target::parse("https://am.local").is_err());
        assert!(Target::parse("not a url").is_err());
    }
}
