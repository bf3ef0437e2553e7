//! An `http://host:port/path` target, as the alert sinks post to it; parsed once when the
//! configuration is loaded, so a bad URL is a configuration error, never a failed post.

use axum::http::Uri;

/// An `http://host:port/path` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `host:port`.
    pub authority: String,
    /// Path and query.
    pub path: String,
}

impl Target {
    /// Parses an `http://` URL; other schemes are errors.
    pub fn parse(url: &str) -> Result<Self, String> {
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

    /// The same host with `suffix` appended to its path (a base URL's API endpoint).
    #[must_use]
    pub fn with_path(mut self, suffix: &str) -> Self {
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
