//! OTLP/HTTP receiver.
//!
//! Endpoints:
//! - `POST /v1/traces`: `application/x-protobuf` or `application/json`, optionally
//!   `Content-Encoding: gzip`. Answers in the request's encoding: 200 with an
//!   `ExportTraceServiceResponse` (partial success when spans were rejected), 400 with a
//!   `google.rpc.Status` on bad data, 413 when the body passes `otlp.max_request_bytes` (measured
//!   after decompression; a gzip bomb is stopped at the limit), 415 on an unknown content type or
//!   encoding, 408 when the body does not arrive within `listeners.body_timeout`, 503 +
//!   `Retry-After` when the aggregator queue is full, when the bodies being read hold the whole
//!   read budget, or when `otlp.max_concurrent_requests` requests are already being decoded
//!   (each may hold up to `max_request_bytes` compressed plus as much inflated). Other methods
//!   get 405. With a token configured ([`crate::collector::auth`]), a request without it gets
//!   401 before its body is read.
//!
//! Every refusal is counted in the self-metrics by reason.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use prost::Message;

use super::decode::{self, DecodeError};
use super::{grpc, Ingest, IngestError, ReadError};
use crate::collector::RefusedRequest;

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

/// gRPC status codes used in `google.rpc.Status` bodies.
const INVALID_ARGUMENT: i32 = 3;
const DEADLINE_EXCEEDED: i32 = 4;
const RESOURCE_EXHAUSTED: i32 = 8;
const UNAVAILABLE: i32 = 14;
const UNAUTHENTICATED: i32 = 16;

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
    Router::new()
        .route("/v1/traces", post(traces))
        .layer(DefaultBodyLimit::disable())
        .with_state(ingest)
}

fn error(enc: Encoding, status: StatusCode, code: i32, message: String) -> Response {
    let (ct, body) = match enc {
        Encoding::Protobuf => (PROTOBUF, RpcStatus { code, message }.encode_to_vec()),
        Encoding::Json => (
            JSON,
            serde_json::to_vec(&serde_json::json!({ "code": code, "message": message }))
                .unwrap_or_default(),
        ),
    };
    (status, [(header::CONTENT_TYPE, ct)], body).into_response()
}

async fn traces(State(ing): State<Arc<Ingest>>, headers: HeaderMap, body: Body) -> Response {
    ing.stats().request("http");
    if !ing.authorized(&headers) {
        let mut r = error(
            Encoding::Json,
            StatusCode::UNAUTHORIZED,
            UNAUTHENTICATED,
            "missing or wrong token (Authorization: Bearer <token>)".into(),
        );
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    let refuse = |reason| ing.stats().refused_request(reason);
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
            refuse(RefusedRequest::UnsupportedMediaType);
            return error(
                Encoding::Json,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                INVALID_ARGUMENT,
                format!("unsupported content type {mime:?}; use {PROTOBUF} or {JSON}"),
            );
        }
    };
    let gzip = match headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("") | Some("identity") => false,
        Some("gzip") => true,
        Some(other) => {
            refuse(RefusedRequest::UnsupportedMediaType);
            return error(
                enc,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                INVALID_ARGUMENT,
                format!("unsupported content encoding {other:?}; use gzip or none"),
            );
        }
    };
    let limit = ing.max_request_bytes();
    let too_large = |ing: &Ingest| {
        ing.stats().refused_request(RefusedRequest::TooLarge);
        error(
            enc,
            StatusCode::PAYLOAD_TOO_LARGE,
            RESOURCE_EXHAUSTED,
            format!("request body is larger than {limit} bytes"),
        )
    };
    // Read first (deadline and byte budget, counted by `read_body`), then take a decoding slot.
    let (raw, _bytes) = match ing.read_body(body).await {
        Ok(r) => r,
        Err(e) => {
            let (status, code) = match e {
                ReadError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, RESOURCE_EXHAUSTED),
                ReadError::Timeout(_) => (StatusCode::REQUEST_TIMEOUT, DEADLINE_EXCEEDED),
                ReadError::Overloaded => return unavailable(enc, e.to_string()),
                ReadError::Io(_) => (StatusCode::BAD_REQUEST, INVALID_ARGUMENT),
            };
            return error(enc, status, code, e.to_string());
        }
    };
    let Some(_permit) = ing.body_permit() else {
        return unavailable(
            enc,
            "too many requests being decoded at once; retry later".into(),
        );
    };
    let inflated;
    let bytes: &[u8] = if gzip {
        match decode::gunzip(&raw, limit) {
            Ok(b) => {
                inflated = b;
                &inflated
            }
            Err(DecodeError::TooLarge { .. }) => return too_large(&ing),
            Err(e) => {
                refuse(RefusedRequest::Decode);
                return error(
                    enc,
                    StatusCode::BAD_REQUEST,
                    INVALID_ARGUMENT,
                    e.to_string(),
                );
            }
        }
    } else {
        &raw
    };
    let result = match enc {
        Encoding::Protobuf => ing.ingest_protobuf(bytes),
        Encoding::Json => match decode::decode_json(bytes) {
            Ok(req) => ing.ingest_request(&req),
            Err(e) => {
                refuse(RefusedRequest::Decode);
                Err(IngestError::Decode(e))
            }
        },
    };
    match result {
        Ok(a) => {
            let resp = grpc::response(a);
            let body = match enc {
                Encoding::Protobuf => resp.encode_to_vec(),
                Encoding::Json => match &resp.partial_success {
                    None => b"{}".to_vec(),
                    Some(p) => serde_json::to_vec(&serde_json::json!({
                        "partialSuccess": {
                            "rejectedSpans": p.rejected_spans.to_string(),
                            "errorMessage": p.error_message,
                        }
                    }))
                    .unwrap_or_default(),
                },
            };
            let ct = if enc == Encoding::Protobuf {
                PROTOBUF
            } else {
                JSON
            };
            (StatusCode::OK, [(header::CONTENT_TYPE, ct)], body).into_response()
        }
        Err(e @ IngestError::Decode(_)) => error(
            enc,
            StatusCode::BAD_REQUEST,
            INVALID_ARGUMENT,
            e.to_string(),
        ),
        Err(e @ IngestError::Overloaded) => unavailable(enc, e.to_string()),
    }
}

/// 503 + `Retry-After: 1`.
fn unavailable(enc: Encoding, message: String) -> Response {
    let mut r = error(enc, StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE, message);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}
