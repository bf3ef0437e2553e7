//! OTLP/HTTP receiver.
//!
//! Endpoints: `POST /v1/traces`, `POST /v1/logs` (read for the coding agents' tool calls) and
//! `POST /v1/metrics` (checked and acknowledged), each alike:
//! - `application/x-protobuf` or `application/json` (chunked or not), optionally
//!   `Content-Encoding: gzip`. Answers in the request's encoding: 200 with the signal's export
//!   response (partial success when spans were rejected), 400 with a
//!   `google.rpc.Status` on bad data, 413 when the body passes `otlp.max_request_bytes` (measured
//!   after decompression; a gzip bomb is stopped at the limit; a body declared over the limit
//!   but within [`MAX_DISCARDED_BODY`] is read and discarded first, so the client reads the 413),
//!   415 on an unknown content type or encoding, 408 when the body does not arrive within `listeners.body_timeout`, 503 +
//!   `Retry-After` when the aggregator queue is full, when the bodies being read hold the whole
//!   read budget, or when `otlp.max_concurrent_requests` requests are already being decoded
//!   (each may hold up to `max_request_bytes` compressed plus as much inflated). Other methods
//!   get 405. With a token configured ([`crate::collector::net::auth`]), a request without it gets
//!   401 without its body being kept: the body is read and discarded first, up to
//!   [`MAX_DISCARDED_BODY`] bytes within `listeners.body_timeout`, so that a client still
//!   sending a large upload reads the 401 instead of a broken pipe; a larger or slower body gets
//!   the 401 with `Connection: close`.
//!
//! `POST /v1/hooks/{agent}` takes the coding agents' hook payloads (JSON; see [`super::hooks`])
//! through the same steps, budgets, token and counters; an unknown agent gets 404, and an
//! optional `?service=NAME` names the series' service when the agent's telemetry uses another
//! `service.name` than its default.
//!
//! Every refusal is counted in the self-metrics by reason.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use prost::bytes::Bytes;
use prost::Message;

use super::admission::MAX_DISCARDED_BODY;
use super::decode;
use super::hooks::{self, HookAgent};
use super::{grpc, Accepted, Ingest, Refusal};
use crate::collector::stats::OtlpSignal;
use crate::collector::RefusedRequest;

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

/// `google.rpc.Status`, the body of every OTLP/HTTP error.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    /// gRPC status code.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// Human-readable message.
    #[prost(string, tag = "2")]
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Encoding {
    Protobuf,
    Json,
}

/// The OTLP/HTTP router.
pub fn router(ingest: Arc<Ingest>) -> Router {
    let route = |r: Router<Arc<Ingest>>, signal: OtlpSignal| {
        r.route(
            signal.http_path(),
            post(
                move |State(ing): State<Arc<Ingest>>, headers: HeaderMap, body: Body| {
                    export(ing, signal, headers, body)
                },
            ),
        )
    };
    OtlpSignal::ALL
        .into_iter()
        .fold(Router::new(), route)
        .route(hooks::HOOKS_PATH, post(hook))
        .layer(DefaultBodyLimit::disable())
        .with_state(ingest)
}

/// Answers a refusal (already counted) in `enc`: its status, a `google.rpc.Status` body,
/// `Retry-After` when retryable, `WWW-Authenticate` for a missing token.
fn refusal(enc: Encoding, r: Refusal) -> Response {
    let status = StatusCode::from_u16(r.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    let code = r.grpc_code();
    let (ct, body) = match enc {
        Encoding::Protobuf => (
            PROTOBUF,
            RpcStatus {
                code,
                message: r.message.clone(),
            }
            .encode_to_vec(),
        ),
        Encoding::Json => (
            JSON,
            serde_json::to_vec(&serde_json::json!({ "code": code, "message": r.message }))
                .unwrap_or_default(),
        ),
    };
    let mut resp = (status, [(header::CONTENT_TYPE, ct)], body).into_response();
    if r.retryable() {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if r.reason == RefusedRequest::Unauthenticated {
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    resp
}

async fn export(ing: Arc<Ingest>, signal: OtlpSignal, headers: HeaderMap, body: Body) -> Response {
    ing.stats().request("http");
    if let Err(r) = ing.authorize(&headers) {
        return unauthenticated(&ing, r, body).await;
    }
    match handle(&ing, signal, &headers, body).await {
        Ok((enc, accepted)) => respond(enc, accepted),
        Err((enc, r)) => refusal(enc, r.counted(ing.stats())),
    }
}

/// The 401 of a request without the token, its body read and discarded first (up to
/// [`MAX_DISCARDED_BODY`] or `otlp.max_request_bytes`, within `listeners.body_timeout`) so a
/// client still sending reads it; with `Connection: close` when the body was not read whole.
async fn unauthenticated(ing: &Ingest, r: Refusal, body: Body) -> Response {
    let whole = ing
        .discard_body(body, MAX_DISCARDED_BODY.min(ing.max_request_bytes()))
        .await;
    let mut resp = refusal(Encoding::Json, r.counted(ing.stats()));
    if !whole {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// The steps of one request; a refusal carries the encoding to answer in.
async fn handle(
    ing: &Ingest,
    signal: OtlpSignal,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Encoding, Accepted), (Encoding, Refusal)> {
    let (enc, gzip) = negotiate(headers)?;
    let at = |r: Refusal| (enc, r);
    // Read first (deadline and byte budget), then take a decoding slot.
    let (raw, _bytes) = ing.read_body(body).await.map_err(at)?;
    let _slot = ing.decode_slot().map_err(at)?;
    // Owned bytes, shared (not copied) with the upstreams a request is forwarded to.
    let bytes = if gzip {
        Bytes::from(decode::gunzip(&raw, ing.max_request_bytes()).map_err(|e| at(e.into()))?)
    } else {
        raw
    };
    let accepted = match enc {
        Encoding::Protobuf => ing.ingest_signal(signal, &bytes).await,
        Encoding::Json => match decode::json_to_protobuf(signal, &bytes).map(Bytes::from) {
            Err(e) => Err(Refusal::from(e)),
            Ok(pb) if signal == OtlpSignal::Metrics => {
                ing.accepted(signal, &pb);
                Ok(Accepted::default())
            }
            Ok(pb) => ing.ingest_signal(signal, &pb).await,
        },
    };
    accepted.map(|a| (enc, a)).map_err(at)
}

/// The request's encoding and whether it is gzipped; an unknown type is answered in JSON, an
/// unknown content encoding in the request's type.
fn negotiate(headers: &HeaderMap) -> Result<(Encoding, bool), (Encoding, Refusal)> {
    let unsupported = |m: String| Refusal::new(RefusedRequest::UnsupportedMediaType, m);
    let mime = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let enc = match mime.as_str() {
        PROTOBUF | "application/protobuf" => Encoding::Protobuf,
        JSON => Encoding::Json,
        _ => {
            return Err((
                Encoding::Json,
                unsupported(format!(
                    "unsupported content type {mime:?}; use {PROTOBUF} or {JSON}"
                )),
            ))
        }
    };
    match headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("") | Some("identity") => Ok((enc, false)),
        Some("gzip") => Ok((enc, true)),
        Some(other) => Err((
            enc,
            unsupported(format!(
                "unsupported content encoding {other:?}; use gzip or none"
            )),
        )),
    }
}

/// The query of a hook route.
#[derive(Debug, Default, serde::Deserialize)]
struct HookQuery {
    /// The `service.name` the agent's telemetry uses, when not its default.
    service: Option<String>,
}

/// `POST /v1/hooks/{agent}`: one hook payload, answered `{}` (Claude Code reads an HTTP hook's
/// answer as JSON; an empty object asks nothing of it).
async fn hook(
    State(ing): State<Arc<Ingest>>,
    Path(agent): Path<String>,
    Query(query): Query<HookQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    ing.stats().request("http");
    let Some(agent) = HookAgent::parse(&agent) else {
        let names: Vec<_> = HookAgent::ALL.iter().map(|a| a.name()).collect();
        let message = format!(
            "no hook for agent {:?}; known: {}",
            crate::label::sanitize(&agent, 64).value,
            names.join(", ")
        );
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, JSON)],
            serde_json::to_vec(&serde_json::json!({ "code": 5, "message": message }))
                .unwrap_or_default(),
        )
            .into_response();
    };
    if let Err(r) = ing.authorize(&headers) {
        return unauthenticated(&ing, r, body).await;
    }
    let service = query.service;
    match handle_hook(&ing, agent, service.as_deref(), &headers, body).await {
        Ok(()) => (StatusCode::OK, [(header::CONTENT_TYPE, JSON)], "{}").into_response(),
        Err(r) => refusal(Encoding::Json, r.counted(ing.stats())),
    }
}

/// The steps of one authorized hook request: those of an OTLP request, JSON only, not gzipped.
async fn handle_hook(
    ing: &Ingest,
    agent: HookAgent,
    service: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Result<(), Refusal> {
    match negotiate(headers) {
        Ok((Encoding::Json, false)) => {}
        // Some hook runners send no content type: JSON is all they send.
        Err((_, _)) if headers.get(header::CONTENT_TYPE).is_none() => {}
        Ok(_) => {
            return Err(Refusal::new(
                RefusedRequest::UnsupportedMediaType,
                format!("a hook payload is {JSON}, not compressed"),
            ))
        }
        Err((_, r)) => return Err(r),
    }
    let (raw, _bytes) = ing.read_body(body).await?;
    let _slot = ing.decode_slot()?;
    ing.ingest_hook(agent, service, &raw).map(|_| ())
}

/// 200 with an `ExportTraceServiceResponse` in the request's encoding.
fn respond(enc: Encoding, a: Accepted) -> Response {
    let resp = grpc::response(a);
    let (ct, body) = match enc {
        Encoding::Protobuf => (PROTOBUF, resp.encode_to_vec()),
        Encoding::Json => (
            JSON,
            match &resp.partial_success {
                None => b"{}".to_vec(),
                Some(p) => serde_json::to_vec(&serde_json::json!({
                    "partialSuccess": {
                        "rejectedSpans": p.rejected_spans.to_string(),
                        "errorMessage": p.error_message,
                    }
                }))
                .unwrap_or_default(),
            },
        ),
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, ct)], body).into_response()
}
