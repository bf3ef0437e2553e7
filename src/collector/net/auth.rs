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
//! the token.
//!
//! The comparison leaks neither where the tokens differ nor the token's length: each candidate
//! is hashed (SHA-1, already compiled for the arguments' hash) and the two 20-byte digests are
//! compared in full. Whatever its timing, a comparison of digests tells an attacker only about
//! digests, which they cannot steer toward the token's without a preimage, a property SHA-1
//! keeps (its known weakness is collisions between two inputs an attacker both chooses).

use axum::http::HeaderMap;
use sha1::{Digest, Sha1};

/// The digest a token is compared by.
type TokenDigest = [u8; 20];

/// The token check; disabled when no token is configured.
#[derive(Clone, Default)]
pub(crate) struct Auth {
    token: Option<TokenDigest>,
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
            token: token.map(|t| digest(t.as_bytes())),
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

fn digest(token: &[u8]) -> TokenDigest {
    Sha1::digest(token).into()
}

/// Whether `candidate` is the token whose digest is `token`: every byte of both digests is
/// compared, whatever the lengths of the tokens.
fn same(candidate: &[u8], token: &TokenDigest) -> bool {
    let d = digest(candidate);
    let diff = d
        .iter()
        .zip(token)
        .fold(0u8, |acc, (x, y)| std::hint::black_box(acc | (x ^ y)));
    diff == 0
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
        // Longer, shorter and empty candidates are compared the same way, and refused.
        for wrong in ["s3cret0", "s3cre", "", "S3CRET", &"s".repeat(10_000)] {
            assert!(!same(wrong.as_bytes(), &digest(b"s3cret")), "{wrong}");
        }
        assert!(same(b"s3cret", &digest(b"s3cret")));
    }
}
