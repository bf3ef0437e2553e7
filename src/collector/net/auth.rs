//! Optional authentication of the OTLP receivers and the admin API with one shared token.
//!
//! With `auth.token` (or `auth.token_file`, `TOOLSIZE_AUTH_TOKEN`, `TOOLSIZE_AUTH_TOKEN_FILE`,
//! `--auth-token-file`) set, every OTLP request and every admin request but `/healthz` and
//! `/readyz` must carry `Authorization: Bearer <token>`, or the token alone in the header named
//! by `auth.api_key_header` (e.g. `x-api-key`). Standard exporters need configuration only:
//! `OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20<token>`. A missing or wrong token gets
//! HTTP 401 (with `WWW-Authenticate: Bearer`) or gRPC `UNAUTHENTICATED`, is counted
//! (`toolsize_otlp_requests_refused_total{reason="unauthenticated"}`,
//! `toolsize_admin_requests_refused_total{reason="unauthenticated"}`) and never logged with
//! the token. The comparison takes the same time wherever the tokens differ.

use axum::http::HeaderMap;

/// The token check; disabled when no token is configured.
#[derive(Clone, Default)]
pub(crate) struct Auth {
    token: Option<Vec<u8>>,
    api_key_header: Option<axum::http::HeaderName>,
    admin: bool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("enabled", &self.token.is_some())
            .field("api_key_header", &self.api_key_header)
            .field("admin", &self.admin)
            .finish()
    }
}

impl Auth {
    /// A check of `token` (none: every request passes), also accepted in `api_key_header`;
    /// `admin` says whether the admin API requires it too.
    pub(crate) fn new(
        token: Option<&str>,
        api_key_header: Option<&str>,
        admin: bool,
    ) -> Result<Self, String> {
        let api_key_header = api_key_header
            .map(|h| {
                axum::http::HeaderName::from_bytes(h.trim().as_bytes())
                    .map_err(|_| format!("{h:?} is not a header name"))
            })
            .transpose()?;
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        if let Some(t) = token {
            if t.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
                return Err("the token must be printable ASCII without spaces".into());
            }
        }
        Ok(Self {
            token: token.map(|t| t.as_bytes().to_vec()),
            api_key_header,
            admin,
        })
    }

    /// Whether a token is required at all.
    pub(crate) fn enabled(&self) -> bool {
        self.token.is_some()
    }

    /// Whether the admin API requires the token.
    pub(crate) fn admin(&self) -> bool {
        self.enabled() && self.admin
    }

    /// Whether `headers` carry the token (always true when none is configured).
    pub(crate) fn check(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let bearer = headers
            .get_all(axum::http::header::AUTHORIZATION)
            .iter()
            .filter_map(|v| {
                let v = v.as_bytes();
                (v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer "))
                    .then(|| v[7..].trim_ascii())
            })
            .any(|t| same(t, token));
        bearer
            || self.api_key_header.as_ref().is_some_and(|h| {
                headers
                    .get_all(h)
                    .iter()
                    .any(|v| same(v.as_bytes().trim_ascii(), token))
            })
    }
}

/// Equality whose time does not depend on where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn bearer_and_api_key_headers() {
        let a = Auth::new(Some("s3cret"), Some("x-api-key"), true).unwrap();
        assert!(a.check(&headers(&[("authorization", "Bearer s3cret")])));
        assert!(a.check(&headers(&[("authorization", "bearer  s3cret ")])));
        assert!(a.check(&headers(&[("x-api-key", "s3cret")])));
        assert!(!a.check(&headers(&[("authorization", "Bearer s3cre")])));
        assert!(!a.check(&headers(&[("authorization", "Basic s3cret")])));
        assert!(!a.check(&headers(&[("x-other", "s3cret")])));
        assert!(!a.check(&HeaderMap::new()));
        let open = Auth::new(None, None, true).unwrap();
        assert!(open.check(&HeaderMap::new()) && !open.enabled());
        assert!(Auth::new(Some("has space"), None, true).is_err());
        assert!(Auth::new(Some("t"), Some("bad header"), true).is_err());
        assert!(!format!("{a:?}").contains("s3cret"));
    }
}
