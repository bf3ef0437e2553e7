//! Admin HTTP: the status page, Prometheus metrics, the JSON API and health checks.
//!
//! Endpoints:
//! - `GET /`: the status page, one self-contained HTML page (`status.html`, compiled in) that
//!   reads the three JSON endpoints below every 2 s: the ceiling and the layer stack, p95 per tool
//!   against the ceiling for a window, firing and recently resolved alerts. It shows only what
//!   the JSON API serves, and builds its DOM from text nodes, never from markup.
//! - `GET /tools/{tool}?service=`: one tool's page (`tool.html`, compiled in, same rules as the
//!   status page): p50/p95/p99 and truncation and error rates over time from the history
//!   endpoint, the window's size distribution (`size_distribution`) against the layer limits, the
//!   largest results with their trace ids and the most repeated argument hashes, as inline SVG.
//! - `GET /metrics`: Prometheus text format 0.0.4 (see [`crate::collector::read::exposition`]),
//!   OpenMetrics 1.0 with exemplars when `Accept` asks for `application/openmetrics-text` (as
//!   Prometheus does by default), or the protobuf format with native histograms and exemplars
//!   when `Accept` asks for it (see [`crate::collector::read::exposition_proto`]).
//! - `GET /api/v1/tools?window=5m|1h|all&service=S`: per (service, tool) count, p50, p95, p99,
//!   max, errors, truncated, truncated upstream, unknown size, latency p95.
//! - `GET /api/v1/tools/{tool}?window=&service=`: the same plus the largest recent results (trace
//!   id, span id, args hash) and the most repeated argument hashes; 404 for an unknown tool.
//! - `GET /api/v1/tools/{tool}/history?service=`: per series, one point per slot of the shortest
//!   window (1 minute by default) over the longest (1 hour): count, sized, p50, p95, p99, max,
//!   errors, truncated, truncated upstream, over ceiling; the open slot last. 404 for an unknown
//!   tool.
//! - `GET /api/v1/layers`: the effective layer stack, in stack order: each layer's id, product,
//!   limit, unit, scope, action, limit in bytes (and whether that is an estimate) and the source
//!   of its limit (flag, env, file, default, catalog); plus the ceiling (the weakest layer), and
//!   `stacks`: the other stacks series are held to (configured services', then the coding
//!   agents'), each with the services it holds and its layers with the tools each applies to.
//! - Each row of `/api/v1/tools` and `/api/v1/tools/{tool}` says the `stack` its series is held
//!   to and its `ceiling` (layer, bytes, estimated).
//! - `GET /api/v1/forward`: `{"upstreams": [...]}`, each upstream of `--forward` with its
//!   `protocol`, the requests `sent`, dropped for a full queue (`queue_full`), given up
//!   (`gave_up`), still `queued`, the `retries` and the `last_error`.
//! - `GET /api/v1/unrecognised`: `{"unrecognised": [...], "overflow": {...}, "recipe_doc": ..}`,
//!   per service the spans and log records that arrived but were no tool call, the attribute
//!   keys of the first few (keys only, never values), their scopes, first and last seen, and the
//!   recipe to fix it ([`crate::collector::ingest::unrecognised`]); answered from the receivers'
//!   shared counts, without asking the aggregator. The status page shows it while no tool call
//!   has arrived.
//! - `GET /api/v1/agents`: `{"agents": [...], "now_ms": ..}`, per coding agent heard from
//!   (`agent`: its stack's name), for each of `traces`, `logs`, `metrics` and `hooks`: the
//!   `count` of tool-call records (metrics: requests; hooks: payloads), how many were `sized`,
//!   and `last_seen_ms` ([`crate::collector::ingest::heard`]); counts only, answered from the
//!   receivers' shared counts. `toolsize doctor` reads it.
//! - `GET /api/v1/sessions?limit=N&service=S`: the context ledger's heaviest sessions (at most
//!   200, 20 by default), by context tokens: per session its service, id (the emitter's session
//!   id, else the trace id) and sizes and counts only (requests, results, result tokens, results
//!   held, context tokens, input, cache-read and cache-creation tokens, compactions, idle
//!   seconds), with the ledger's cap and what overflowed it ([`crate::collector::state::context`]).
//! - `GET /api/v1/alerts`: `{"firing": [...], "resolved": [...]}`, each alert with its name,
//!   state, fingerprint, labels, annotations, `runbook_url`, `startsAt` and `endsAt`; answered
//!   from the alert task's last published set, without asking the aggregator.
//! - `GET /runbook`: the alert runbook as HTML, one section per alert (`#<alertname lowercased>`).
//! - `GET /healthz`: 200 while the process serves.
//! - With a token configured ([`crate::collector::net::auth`]), every path but `/healthz`,
//!   `/readyz` and the pages (`/`, `/tools/{tool}`, `/runbook`) answers 401 to a request without
//!   it. The pages' HTML holds no data: their script asks the API with the token, which the user
//!   gives them once per tab (a box shown after a 401, or a `#token=` fragment) and which they
//!   keep in `sessionStorage`; no cookie stands for it, so the API is as closed as before.
//! - `GET /readyz`: 200 when the aggregator answers within 1 s, else 503; 503 too while the last
//!   three or more snapshot writes failed, while what is on disk is older than two snapshot
//!   intervals + 5 s (a stalled write), and while a snapshot refused at start could not be moved
//!   aside and nothing has been written over it; the body says which.
//!
//! Every answer is computed by the aggregator task; this module only asks (bounded command
//! channel) and waits at most 5 s, answering 503 if the aggregator is too busy. `/metrics` is
//! the exception: the aggregator hands out the numbers and the text is rendered here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};

use crate::collector::alerts::AlertsHandle;
use crate::collector::forward::Forwarder;
use crate::collector::ingest::heard::Heard;
use crate::collector::ingest::unrecognised::Unrecognised;
use crate::collector::read::exposition::Frame;
use crate::collector::read::Command;
use crate::collector::read::{health, pages};
use crate::collector::state::stacks::OtherStack;
use crate::collector::SelfStats;
use crate::layers::Stack;

/// Content type of `/metrics`.
pub(crate) const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the admin router needs.
#[derive(Debug, Clone)]
pub struct ApiState {
    control: mpsc::Sender<Command>,
    stats: Arc<SelfStats>,
    /// The daemon's stack and the other stacks series are held to (configured services',
    /// coding agents'): replaced whole by a reload.
    stacks: Arc<std::sync::RwLock<ServedStacks>>,
    alerts: AlertsHandle,
    /// OTLP/gRPC and OTLP/HTTP addresses, named by the status page.
    otlp: [SocketAddr; 2],
    auth: Arc<crate::collector::net::auth::Auth>,
    /// The upstreams accepted requests are relayed to, if any.
    forward: Option<Forwarder>,
    /// Spans and log records that were no tool call, per service.
    unrecognised: Arc<Unrecognised>,
    /// What each coding agent has sent, per signal.
    heard: Arc<Heard>,
    /// The last frame the aggregator handed out, without its series: served with fresh
    /// self-metrics once it has stopped, so the counters of what is lost since stay visible.
    last_frame: Arc<std::sync::Mutex<Option<Frame>>>,
}

impl ApiState {
    /// A state asking the aggregator behind `control`.
    pub(crate) fn new(control: mpsc::Sender<Command>, stats: Arc<SelfStats>) -> Self {
        Self {
            control,
            stats,
            stacks: Arc::default(),
            alerts: AlertsHandle::default(),
            otlp: [
                crate::collector::config::DEFAULT_OTLP_GRPC_ADDR,
                crate::collector::config::DEFAULT_OTLP_HTTP_ADDR,
            ]
            .map(|a| a.parse().expect("default address")),
            auth: Arc::default(),
            forward: None,
            unrecognised: Arc::default(),
            heard: Arc::default(),
            last_frame: Arc::default(),
        }
    }

    /// The counts `/api/v1/unrecognised` serves (default: empty ones).
    #[must_use]
    pub(crate) fn with_unrecognised(mut self, unrecognised: Arc<Unrecognised>) -> Self {
        self.unrecognised = unrecognised;
        self
    }

    /// The counts `/api/v1/agents` serves (default: empty ones).
    #[must_use]
    pub(crate) fn with_heard(mut self, heard: Arc<Heard>) -> Self {
        self.heard = heard;
        self
    }

    /// Requires the token of `auth` on all but `/healthz` and `/readyz` when `auth.admin()`
    /// (default: none required).
    #[must_use]
    pub(crate) fn with_auth(mut self, auth: Arc<crate::collector::net::auth::Auth>) -> Self {
        self.auth = auth;
        self
    }

    /// The OTLP addresses the status page tells exporters to use (default: the default ones).
    #[must_use]
    pub(crate) fn with_otlp_addrs(mut self, grpc: SocketAddr, http: SocketAddr) -> Self {
        self.otlp = [grpc, http];
        self
    }

    /// The upstreams whose counts `/api/v1/forward` and `/metrics` show (default: none).
    #[must_use]
    pub(crate) fn with_forwarder(mut self, forward: Option<Forwarder>) -> Self {
        self.forward = forward;
        self
    }

    /// The alerts served on `/api/v1/alerts` (default: none).
    #[must_use]
    pub(crate) fn with_alerts(mut self, alerts: AlertsHandle) -> Self {
        self.alerts = alerts;
        self
    }

    /// The alert task's handle.
    pub(crate) fn alerts(&self) -> &AlertsHandle {
        &self.alerts
    }

    /// The effective layer stack served on `/api/v1/layers` (default: the default stack).
    #[must_use]
    pub(crate) fn with_stack(self, stack: Arc<Stack>, others: Vec<OtherStack>) -> Self {
        self.set_stack(stack, others);
        self
    }

    /// Serves `stack` and `others` on `/api/v1/layers` from now on (a reload).
    pub(crate) fn set_stack(&self, stack: Arc<Stack>, others: Vec<OtherStack>) {
        let served = ServedStacks {
            stack,
            others: others.into(),
        };
        // A poisoned lock held a complete value: take it over.
        *self.stacks.write().unwrap_or_else(|e| e.into_inner()) = served;
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
        wait: Duration,
    ) -> Result<T, Response> {
        let busy = || {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({"error": "aggregator unavailable"})),
            )
                .into_response()
        };
        let (tx, rx) = oneshot::channel();
        tokio::time::timeout(wait, async {
            self.control.send(make(tx)).await.ok()?;
            rx.await.ok()
        })
        .await
        .ok()
        .flatten()
        .ok_or_else(busy)
    }
}

/// Query parameters of the tools endpoints.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ToolsQuery {
    /// A configured window label, or `all` (default).
    pub(crate) window: Option<String>,
    /// Only this service.
    pub(crate) service: Option<String>,
}

/// The status page.
pub const STATUS_PATH: &str = "/";
/// One tool's page.
pub const TOOL_PAGE_PATH: &str = "/tools/{tool}";
/// The Prometheus exposition.
pub const METRICS_PATH: &str = "/metrics";
/// Every series' summary.
pub const TOOLS_PATH: &str = "/api/v1/tools";
/// One tool's series in detail.
pub const TOOL_PATH: &str = "/api/v1/tools/{tool}";
/// One tool's history.
pub const HISTORY_PATH: &str = "/api/v1/tools/{tool}/history";
/// The stacks and their layers.
pub const LAYERS_PATH: &str = "/api/v1/layers";
/// Firing and recently resolved alerts.
pub const ALERTS_PATH: &str = "/api/v1/alerts";
/// Each forwarding upstream's counts.
pub const FORWARD_PATH: &str = "/api/v1/forward";
/// Per service, the spans and log records that were no tool call.
pub const UNRECOGNISED_PATH: &str = "/api/v1/unrecognised";
/// Per coding agent, which signals arrived and when last.
pub const AGENTS_PATH: &str = "/api/v1/agents";
/// The context ledger's heaviest sessions.
pub const SESSIONS_PATH: &str = "/api/v1/sessions";
/// The alert runbook.
pub const RUNBOOK_PATH: &str = "/runbook";
/// Liveness.
pub const HEALTHZ_PATH: &str = "/healthz";
/// Readiness.
pub const READYZ_PATH: &str = "/readyz";

/// Every path the admin router serves, in the order `admin.addr`'s documentation lists them
/// (a test holds that documentation to this list).
pub const ROUTES: [&str; 15] = [
    STATUS_PATH,
    TOOL_PAGE_PATH,
    METRICS_PATH,
    TOOLS_PATH,
    TOOL_PATH,
    HISTORY_PATH,
    LAYERS_PATH,
    ALERTS_PATH,
    FORWARD_PATH,
    UNRECOGNISED_PATH,
    AGENTS_PATH,
    SESSIONS_PATH,
    RUNBOOK_PATH,
    HEALTHZ_PATH,
    READYZ_PATH,
];

/// The admin router.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route(STATUS_PATH, get(status))
        .route(TOOL_PAGE_PATH, get(pages::tool_page))
        .route(METRICS_PATH, get(metrics))
        .route(TOOLS_PATH, get(tools))
        .route(TOOL_PATH, get(tool))
        .route(HISTORY_PATH, get(history))
        .route(LAYERS_PATH, get(layers))
        .route(ALERTS_PATH, get(alerts))
        .route(FORWARD_PATH, get(forward))
        .route(UNRECOGNISED_PATH, get(unrecognised))
        .route(AGENTS_PATH, get(agents))
        .route(SESSIONS_PATH, get(sessions))
        .route(RUNBOOK_PATH, get(pages::runbook))
        .route(HEALTHZ_PATH, get(|| async { "ok\n" }))
        .route(READYZ_PATH, get(readyz))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_token,
        ))
        .with_state(state)
}

/// Whether `path` is answered without the token: the probes, and the pages, whose HTML holds no
/// data (their script asks the API with the token the user gives it) and the runbook.
fn open_path(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/" | "/runbook")
        || path
            .strip_prefix("/tools/")
            .is_some_and(|tool| !tool.is_empty() && !tool.contains('/'))
}

/// 401 for a request without the token, when the admin API requires one; the probes and the
/// pages stay open.
async fn require_token(
    State(s): State<ApiState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let open = open_path(req.uri().path());
    if open || !s.auth.admin() || s.auth.check(req.headers()) {
        return next.run(req).await;
    }
    s.stats.admin_unauthenticated();
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "missing or wrong token (Authorization: Bearer <token>)\n",
    )
        .into_response()
}

const WAIT: Duration = Duration::from_secs(5);

fn bad_request(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(serde_json::json!({ "error": message })),
    )
        .into_response()
}

async fn metrics(State(s): State<ApiState>, headers: axum::http::HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let native = crate::collector::read::exposition_proto::wants_protobuf(accept);
    let open_metrics = !native && crate::collector::read::exposition::wants_openmetrics(accept);
    let mut frame = match s
        .ask(|reply| Command::Metrics { native, reply }, WAIT)
        .await
    {
        Ok(frame) => {
            if let Ok(mut last) = s.last_frame.lock() {
                *last = Some(frame.without_series(frame.now));
            }
            frame
        }
        // A stopped aggregator: no tool series (their counts stopped with it), the self-metrics
        // that count what is refused and lost since (a busy one answers 503: Prometheus keeps
        // the last scrape).
        Err(r) => {
            let last = s.last_frame.lock().ok().and_then(|l| l.clone());
            match last.filter(|_| s.control.is_closed()) {
                Some(frame) => frame.without_series(crate::collector::state::now_unix()),
                None => return r,
            }
        }
    };
    frame.forward = s.forward.as_ref().map(Forwarder::views).unwrap_or_default();
    // Rendered here, on a blocking thread, not on the aggregator task.
    let stats = s.stats.clone();
    let alerts = s.alerts.stats.clone();
    let body = tokio::task::spawn_blocking(move || {
        if native {
            let body =
                crate::collector::read::exposition_proto::render_frame(&frame, &stats, &alerts);
            (crate::collector::read::exposition_proto::CONTENT_TYPE, body)
        } else if open_metrics {
            use crate::collector::read::exposition::{self, TextFormat};
            let body =
                exposition::render_frame_as(&frame, &stats, &alerts, TextFormat::OpenMetrics)
                    .into_bytes();
            (exposition::OPENMETRICS_CONTENT_TYPE, body)
        } else {
            let body = crate::collector::read::exposition::render_frame(&frame, &stats, &alerts)
                .into_bytes();
            (METRICS_CONTENT_TYPE, body)
        }
    })
    .await;
    match body {
        Ok((content_type, body)) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `/api/v1/unrecognised`: per service, what arrived and was no tool call.
async fn unrecognised(State(s): State<ApiState>) -> Response {
    Json(s.unrecognised.view()).into_response()
}

/// `/api/v1/agents`: per coding agent, what arrived of each signal.
async fn agents(State(s): State<ApiState>) -> Response {
    Json(s.heard.view(crate::collector::clock::now_unix_ms())).into_response()
}

/// `/api/v1/forward`: each upstream's counts (an empty list without forwarding).
async fn forward(State(s): State<ApiState>) -> Response {
    let views = s.forward.as_ref().map(Forwarder::views).unwrap_or_default();
    Json(serde_json::json!({ "upstreams": views })).into_response()
}

async fn tools(State(s): State<ApiState>, Query(q): Query<ToolsQuery>) -> Response {
    let r = s
        .ask(
            |reply| Command::Tools {
                window: q.window,
                service: q.service,
                reply,
            },
            WAIT,
        )
        .await;
    match r {
        Ok(Ok(view)) => Json(view).into_response(),
        Ok(Err(e)) => bad_request(e),
        Err(r) => r,
    }
}

/// Query parameters of `/api/v1/sessions`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SessionsQuery {
    /// Sessions shown at most (20 by default, at most 200).
    pub(crate) limit: Option<usize>,
    /// Only this service.
    pub(crate) service: Option<String>,
}

async fn sessions(State(s): State<ApiState>, Query(q): Query<SessionsQuery>) -> Response {
    use crate::collector::state::context::{DEFAULT_SESSIONS_SHOWN, MAX_SESSIONS_SHOWN};
    let limit = q.limit.unwrap_or(DEFAULT_SESSIONS_SHOWN);
    if limit == 0 || limit > MAX_SESSIONS_SHOWN {
        return bad_request(format!(
            "limit must be between 1 and {MAX_SESSIONS_SHOWN}, got {limit}"
        ));
    }
    let r = s
        .ask(
            |reply| Command::Sessions {
                limit,
                service: q.service,
                reply,
            },
            WAIT,
        )
        .await;
    match r {
        Ok(view) => Json(view).into_response(),
        Err(r) => r,
    }
}

async fn tool(
    State(s): State<ApiState>,
    Path(tool): Path<String>,
    Query(q): Query<ToolsQuery>,
) -> Response {
    let r = s
        .ask(
            |reply| Command::Tool {
                tool: tool.clone(),
                window: q.window,
                service: q.service,
                reply,
            },
            WAIT,
        )
        .await;
    match r {
        Ok(Ok(Some(view))) => Json(view).into_response(),
        Ok(Ok(None)) => no_tool(&tool),
        Ok(Err(e)) => bad_request(e),
        Err(r) => r,
    }
}

/// 404 for a tool without series.
fn no_tool(tool: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "error": format!("no tool named {tool:?}") })),
    )
        .into_response()
}

async fn history(
    State(s): State<ApiState>,
    Path(tool): Path<String>,
    Query(q): Query<ToolsQuery>,
) -> Response {
    let r = s
        .ask(
            |reply| Command::History {
                tool: tool.clone(),
                service: q.service,
                reply,
            },
            WAIT,
        )
        .await;
    match r {
        Ok(Some(view)) => Json(view).into_response(),
        Ok(None) => no_tool(&tool),
        Err(r) => r,
    }
}

/// `/`: the status page, naming the OTLP addresses actually bound.
async fn status(State(s): State<ApiState>) -> Response {
    pages::status(s.otlp[0], s.otlp[1])
}

/// `/api/v1/alerts`: firing alerts, then those resolved in the last five minutes.
async fn alerts(State(s): State<ApiState>) -> Response {
    Json(s.alerts.to_json()).into_response()
}

/// `/api/v1/layers`: answered from the resolved stack, without asking the aggregator.
async fn layers(State(s): State<ApiState>) -> Response {
    let served = s.stacks.read().unwrap_or_else(|e| e.into_inner()).clone();
    Json(layers_json(&served.stack, &served.others)).into_response()
}

/// The stacks `/api/v1/layers` serves.
#[derive(Debug, Clone, Default)]
struct ServedStacks {
    stack: Arc<Stack>,
    others: Arc<[OtherStack]>,
}

/// The JSON of `/api/v1/layers`.
pub(crate) fn layers_json(stack: &Stack, others: &[OtherStack]) -> serde_json::Value {
    let layers: Vec<serde_json::Value> = stack
        .layers()
        .iter()
        .map(|l| {
            serde_json::json!({
                "id": l.id(),
                "product": l.layer.product,
                "limit": l.limit,
                "unit": l.layer.unit.as_str(),
                "scope": l.layer.scope.as_str(),
                "action": l.layer.action.as_str(),
                "limit_bytes": l.limit_bytes.map(|b| b.bytes),
                "estimated": l.limit_bytes.is_some_and(|b| b.estimated),
                "source": l.source.as_str(),
            })
        })
        .collect();
    let ceiling = stack.ceiling_bytes().map(|c| {
        serde_json::json!({
            "layer": c.layer_id,
            "bytes": c.bytes,
            "estimated": c.estimated,
            "source": c.source.as_str(),
        })
    });
    let stacks: Vec<serde_json::Value> = others
        .iter()
        .map(|o| {
            let layers: Vec<serde_json::Value> = o
                .layers
                .iter()
                .map(|(id, tools)| serde_json::json!({ "id": id, "tools": tools }))
                .collect();
            serde_json::json!({ "stack": o.stack, "services": o.services, "layers": layers })
        })
        .collect();
    serde_json::json!({ "layers": layers, "ceiling": ceiling, "stacks": stacks })
}

async fn readyz(State(s): State<ApiState>) -> Response {
    let now_ms = crate::collector::state::now_unix_ms();
    if let Some(why) = health::snapshot_trouble(&s.stats.view(), now_ms) {
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    }
    match s
        .ask(|reply| Command::Ping { reply }, Duration::from_secs(1))
        .await
    {
        Ok(()) => "ready\n".into_response(),
        Err(r) => r,
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;
    use crate::collector::read::pages::HTML_CONTENT_TYPE;

    #[test]
    fn the_admin_address_documents_every_route() {
        let text = crate::collector::config::generated_config();
        let doc = text
            .split("\n[admin]\n")
            .nth(1)
            .and_then(|t| t.split("\naddr = ").next())
            .expect("[admin] addr in gen-config")
            .replace("\n# ", " ");
        for r in ROUTES {
            assert!(
                [",", " ", "."]
                    .iter()
                    .any(|end| doc.contains(&format!(" {r}{end}"))),
                "admin.addr's documentation lacks {r}: {doc}"
            );
        }
    }

    #[tokio::test]
    async fn status_page_is_served_as_html_naming_the_otlp_addresses() {
        let (control, _rx) = mpsc::channel(1);
        let state = ApiState::new(control, Arc::default()).with_otlp_addrs(
            "127.0.0.1:14317".parse().unwrap(),
            "127.0.0.1:14318".parse().unwrap(),
        );
        let resp = router(state)
            .oneshot(Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let h = resp.headers();
        assert_eq!(h[header::CONTENT_TYPE], HTML_CONTENT_TYPE);
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        assert!(h[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("connect-src 'self'"));
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let page = std::str::from_utf8(&body).unwrap();
        assert!(page.starts_with("<!doctype html>"));
        assert!(page.contains("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:14318"));
        assert!(page.contains("<code>127.0.0.1:14317</code>"));
        assert!(!page.contains("{{"), "a placeholder is left");
    }
}
