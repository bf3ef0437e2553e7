//! The admin listener's pages: the status page (`/`), one tool's page (`/tools/{tool}`) and the
//! runbook (`/runbook`), compiled in. The pages hold no data: their script asks the JSON API
//! ([`super::api`]), with the token when one is configured, and builds its DOM from text nodes,
//! never from markup. Each answer is built from the templates without asking the aggregator, so
//! a busy or stopped aggregator leaves them served.

use std::net::SocketAddr;

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// Content type of `/` and `/runbook`.
pub(crate) const HTML_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// The status page's template: `{{otlp_http}}` and `{{otlp_grpc}}` stand for the OTLP addresses.
const STATUS_TEMPLATE: &str = include_str!("status.html");

/// One tool's page's template; it reads the tool from its own URL.
const TOOL_TEMPLATE: &str = include_str!("tool.html");

/// The style both pages share, in place of their `{{page_css}}`.
const PAGE_CSS: &str = include_str!("page.css");

/// The script both pages share, in place of their `{{page_auth}}`: the token sent with their
/// API requests, and the sign-in box.
const PAGE_AUTH: &str = include_str!("page_auth.js");

/// One tool's page, the same for every tool.
pub(crate) fn tool_page_html() -> &'static str {
    static PAGE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        TOOL_TEMPLATE
            .replace("{{page_css}}", PAGE_CSS)
            .replace("{{page_auth}}", PAGE_AUTH)
    });
    &PAGE
}

/// The status page's Content-Security-Policy: its own inline style and script, requests to its
/// own origin only.
const STATUS_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; \
    script-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; \
    form-action 'none'";

/// The status page served on `/`, naming the OTLP addresses an exporter should point at.
pub(crate) fn status_page(otlp_grpc: SocketAddr, otlp_http: SocketAddr) -> String {
    STATUS_TEMPLATE
        .replace("{{page_css}}", PAGE_CSS)
        .replace("{{page_auth}}", PAGE_AUTH)
        .replace("{{otlp_http}}", &otlp_http.to_string())
        .replace("{{otlp_grpc}}", &otlp_grpc.to_string())
}

/// `/`: the status page naming the OTLP addresses `otlp_grpc` and `otlp_http`. `no-cache` so
/// that a new daemon's page replaces an old one at once.
pub(super) fn status(otlp_grpc: SocketAddr, otlp_http: SocketAddr) -> Response {
    (
        [
            (header::CONTENT_TYPE, HTML_CONTENT_TYPE),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, STATUS_CSP),
        ],
        status_page(otlp_grpc, otlp_http),
    )
        .into_response()
}

/// `/tools/{tool}`: one tool's page. The page asks the JSON API for the tool itself and says so
/// when it has no series, so every name gets the same page.
pub(super) async fn tool_page() -> Response {
    (
        [
            (header::CONTENT_TYPE, HTML_CONTENT_TYPE),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, STATUS_CSP),
        ],
        tool_page_html(),
    )
        .into_response()
}

/// `/runbook`: the alert runbook.
pub(super) async fn runbook() -> Response {
    (
        [(header::CONTENT_TYPE, HTML_CONTENT_TYPE)],
        crate::collector::alerts::runbook::html(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page is self-contained (no external asset) and never turns data into markup.
    #[test]
    fn status_page_loads_nothing_external_and_parses_no_markup() {
        let page = status_page(
            "127.0.0.1:4317".parse().unwrap(),
            "127.0.0.1:4318".parse().unwrap(),
        );
        for needle in [
            "src=\"http",
            "href=\"http",
            "href=\"/",
            "src=\"/",
            "@import",
            "url(",
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ] {
            for (name, page) in [("status", page.as_str()), ("tool", tool_page_html())] {
                assert!(
                    !page.contains("{{"),
                    "the {name} page has a placeholder left"
                );
                assert!(
                    page.contains("--panel"),
                    "the {name} page has no shared style"
                );
                assert!(
                    !page.contains(needle),
                    "the {name} page contains {needle:?}"
                );
            }
        }
        // Every request goes to the same origin, relative to the page.
        for path in [
            "\"api/v1/layers\"",
            "\"api/v1/alerts\"",
            "\"api/v1/tools?window=\"",
        ] {
            assert!(page.contains(path), "the status page does not fetch {path}");
        }
        // The tool page asks the API relative to /tools/, and links each tool from the overview.
        for path in [
            "\"../api/v1/layers\"",
            "\"../api/v1/tools/\"",
            "\"/history\"",
        ] {
            assert!(
                tool_page_html().contains(path),
                "the tool page does not fetch {path}"
            );
        }
        assert!(page.contains("\"tools/\" + encodeURIComponent"));
    }
}
