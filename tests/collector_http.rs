//! OTLP/HTTP receiver and admin API driven through their routers with `oneshot`: encodings,
//! gzip, every error answer, partial success, and the values served by `/api/v1/tools`.
#![cfg(feature = "collector")]

mod support;

use std::io::Write;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use prost::Message;
use support::collector::*;
use toolsize::collector::ingest::http::{router, RpcStatus};
use toolsize::collector::read::api;
use toolsize::collector::{Pipeline, RefusedRequests};
use tower::ServiceExt;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;

fn post(ct: &str, enc: Option<&str>, body: Vec<u8>) -> Request<Body> {
    let mut b = Request::post("/v1/traces").header("content-type", ct);
    if let Some(e) = enc {
        b = b.header("content-encoding", e);
    }
    b.body(Body::from(body)).unwrap()
}

async fn send(p: &Pipeline, req: Request<Body>) -> (StatusCode, String, Vec<u8>) {
    let resp = router(p.ingest.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    (status, ct, body)
}

async fn get(p: &Pipeline, uri: &str) -> (StatusCode, serde_json::Value) {
    let resp = api::router(p.api.clone())
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    )
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// 503 with `Retry-After: 1` and a `google.rpc.Status` of code UNAVAILABLE (14): a refusal
/// the exporter retries.
async fn assert_retryable(resp: axum::response::Response) {
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "1");
    let b = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    assert_eq!(RpcStatus::decode(&b[..]).unwrap().code, 14);
}

#[tokio::test]
async fn protobuf_json_and_gzip_are_recorded_with_exact_sizes() {
    let p = Pipeline::spawn(&loopback_config()).unwrap();
    let sizes: Vec<u64> = (1..=200).map(|n| n * 37).collect();
    let spans = sizes
        .iter()
        .enumerate()
        .map(|(n, b)| own_span(n as u64, "grep", *b as i64))
        .collect();
    let req = request("agent", spans);

    let (st, ct, body) = send(
        &p,
        post("application/x-protobuf", None, req.encode_to_vec()),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(ct, "application/x-protobuf");
    assert_eq!(
        ExportTraceServiceResponse::decode(&body[..])
            .unwrap()
            .partial_success,
        None
    );

    let (st, _, _) = send(
        &p,
        post(
            "application/x-protobuf",
            Some("gzip"),
            gzip(&req.encode_to_vec()),
        ),
    )
    .await;
    assert_eq!(st, StatusCode::OK);

    let json = serde_json::to_vec(&req).unwrap();
    let (st, ct, body) = send(&p, post("application/json", None, json.clone())).await;
    assert_eq!(
        (st, ct.as_str(), body.as_slice()),
        (StatusCode::OK, "application/json", &b"{}"[..])
    );
    let (st, _, _) = send(
        &p,
        post("application/json; charset=utf-8", Some("gzip"), gzip(&json)),
    )
    .await;
    assert_eq!(st, StatusCode::OK);

    let (st, v) = get(&p, "/api/v1/tools?window=5m").await;
    assert_eq!(st, StatusCode::OK);
    let row = &v["tools"][0];
    assert_eq!(row["service"], "agent");
    assert_eq!(row["tool"], "grep");
    assert_eq!(row["count"], 800);
    assert_eq!(row["measured"], 800);
    for (q, key) in [(0.5, "p50"), (0.95, "p95"), (0.99, "p99")] {
        let exact = exact_quantile(&sizes, q) as f64;
        let got = row[key].as_f64().unwrap();
        assert!(
            (got - exact).abs() / exact <= 0.01,
            "{key}: {got} vs {exact}"
        );
    }
    let (_, v) = get(&p, "/api/v1/tools?service=other").await;
    assert_eq!(v["tools"].as_array().unwrap().len(), 0);

    let (st, v) = get(&p, "/api/v1/tools/grep").await;
    assert_eq!(st, StatusCode::OK);
    let largest = &v["series"][0]["largest"];
    assert_eq!(largest[0]["bytes"], 200 * 37);
    assert_eq!(largest[0]["trace_id"].as_str().unwrap().len(), 32);
    assert_eq!(largest[0]["span_id"].as_str().unwrap().len(), 16);
    assert!(largest[0]["args_hash"].is_string());
    assert!(!v["series"][0]["top_args"].as_array().unwrap().is_empty());
    p.shutdown().await;
}

#[tokio::test]
async fn every_bad_input_gets_its_answer_and_nothing_accepted_is_lost() {
    let p = Pipeline::spawn(&loopback_config()).unwrap();
    let good = request("agent", vec![own_span(1, "read", 1000)]).encode_to_vec();
    assert_eq!(
        send(&p, post("application/x-protobuf", None, good.clone()))
            .await
            .0,
        StatusCode::OK
    );

    // Random bytes and truncated protobuf: 400 with a google.rpc.Status in protobuf.
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    for body in [random, good[..good.len() - 7].to_vec()] {
        let (st, ct, b) = send(&p, post("application/x-protobuf", None, body)).await;
        assert_eq!(
            (st, ct.as_str()),
            (StatusCode::BAD_REQUEST, "application/x-protobuf")
        );
        let status = RpcStatus::decode(&b[..]).unwrap();
        assert_eq!(status.code, 3);
        assert!(!status.message.is_empty());
    }
    // Wrong JSON types: 400 with a JSON Status.
    for body in [
        &br#"{"resourceSpans":"nope"}"#[..],
        br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":12}]}]}]}"#,
        b"{not json",
    ] {
        let (st, ct, b) = send(&p, post("application/json", None, body.to_vec())).await;
        assert_eq!(
            (st, ct.as_str()),
            (StatusCode::BAD_REQUEST, "application/json")
        );
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["code"], 3);
    }
    // Wrong content type: 415. Unknown encoding: 415. Bad gzip: 400.
    assert_eq!(
        send(&p, post("text/plain", None, good.clone())).await.0,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    assert_eq!(
        send(&p, post("application/x-protobuf", Some("br"), good.clone()))
            .await
            .0,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    assert_eq!(
        send(
            &p,
            post("application/x-protobuf", Some("gzip"), good.clone())
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    // Gzip bomb: 100 KiB compressed, 200 MiB inflated, limit 64 MiB: 413 without inflating it all.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    for _ in 0..200 {
        e.write_all(&vec![0u8; 1 << 20]).unwrap();
    }
    let bomb = e.finish().unwrap();
    assert!(bomb.len() < 300_000, "{}", bomb.len());
    let (st, _, b) = send(&p, post("application/x-protobuf", Some("gzip"), bomb)).await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(RpcStatus::decode(&b[..]).unwrap().code, 8);
    // Empty request: success.
    let (st, _, b) = send(&p, post("application/x-protobuf", None, Vec::new())).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        ExportTraceServiceResponse::decode(&b[..])
            .unwrap()
            .partial_success,
        None
    );
    assert_eq!(
        send(&p, post("application/json", None, b"{}".to_vec()))
            .await
            .0,
        StatusCode::OK
    );
    // Wrong method: 405.
    let resp = router(p.ingest.clone())
        .oneshot(Request::get("/v1/traces").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);

    // Partial success: one unusable tool span (bad trace id) among good ones.
    let mut bad = own_span(9, "read", 5);
    bad.trace_id = vec![1, 2, 3];
    let req = request("agent", vec![own_span(2, "read", 3000), bad]);
    let (st, _, b) = send(
        &p,
        post("application/x-protobuf", None, req.encode_to_vec()),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let ps = ExportTraceServiceResponse::decode(&b[..])
        .unwrap()
        .partial_success
        .unwrap();
    assert_eq!(ps.rejected_spans, 1);
    assert!(
        ps.error_message.contains("trace_id"),
        "{}",
        ps.error_message
    );
    let (st, _, b) = send(
        &p,
        post("application/json", None, serde_json::to_vec(&req).unwrap()),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["partialSuccess"]["rejectedSpans"], "1");

    // The accepted results are all there.
    let (_, v) = get(&p, "/api/v1/tools").await;
    assert_eq!(v["tools"][0]["count"], 3);
    assert_eq!(v["tools"][0]["max"].as_u64().unwrap(), 3000);
    let st = p.stats.view();
    assert_eq!(st.spans_tool, 3);
    assert_eq!(st.spans_invalid, 2);
    assert_eq!(
        st.refused_requests,
        RefusedRequests {
            decode: 6,
            too_large: 1,
            unsupported_media_type: 2,
            ..RefusedRequests::default()
        }
    );
    p.shutdown().await;
}

#[tokio::test]
async fn api_errors() {
    let p = Pipeline::spawn(&loopback_config()).unwrap();
    let (st, v) = get(&p, "/api/v1/tools?window=2d").await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("5m, 1h, all"));
    assert_eq!(get(&p, "/api/v1/tools/nope").await.0, StatusCode::NOT_FOUND);
    let resp = api::router(p.api.clone())
        .oneshot(Request::get("/healthz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = api::router(p.api.clone())
        .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    p.shutdown().await;
}

#[tokio::test]
async fn full_queue_is_refused_as_retryable_and_counted() {
    use std::sync::Arc;
    use toolsize::collector::ingest::recognize::Recognizer;
    use toolsize::collector::ingest::Ingest;
    use toolsize::collector::SelfStats;
    // A queue of one batch that nobody drains.
    let (tx, _rx) = tokio::sync::mpsc::channel(1);
    let stats = Arc::new(SelfStats::default());
    let ingest = Arc::new(Ingest::new(
        Arc::new(Recognizer::new(&Default::default(), 128)),
        tx,
        stats.clone(),
        1 << 20,
    ));
    let body = request(
        "agent",
        vec![own_span(1, "read", 10), own_span(2, "read", 20)],
    )
    .encode_to_vec();
    let send = |b: Vec<u8>| router(ingest.clone()).oneshot(post("application/x-protobuf", None, b));
    assert_eq!(send(body.clone()).await.unwrap().status(), StatusCode::OK);
    let resp = send(body).await.unwrap();
    assert_retryable(resp).await;
    let v = stats.view();
    assert_eq!(
        (
            v.spans_tool,
            v.spans_overloaded,
            v.refused_requests.overloaded
        ),
        (2, 2, 1)
    );
}

#[tokio::test]
async fn too_many_bodies_at_once_are_refused_as_retryable_and_counted() {
    use std::sync::Arc;
    use toolsize::collector::ingest::recognize::Recognizer;
    use toolsize::collector::ingest::Ingest;
    use toolsize::collector::SelfStats;
    let (tx, _rx) = tokio::sync::mpsc::channel(16);
    let stats = Arc::new(SelfStats::default());
    let ingest = Arc::new(
        Ingest::new(
            Arc::new(Recognizer::new(&Default::default(), 128)),
            tx,
            stats.clone(),
            1 << 20,
        )
        .with_max_concurrent_requests(1),
    );
    let body = request("agent", vec![own_span(1, "read", 10)]).encode_to_vec();
    let send = |b: Vec<u8>| router(ingest.clone()).oneshot(post("application/x-protobuf", None, b));
    // Another request is reading its body: this one must not buffer a second one.
    let busy = ingest.body_permit().expect("one permit free");
    let resp = send(body.clone()).await.unwrap();
    assert_retryable(resp).await;
    assert_eq!(
        stats.view().refused_requests.overloaded,
        1,
        "counted as overloaded"
    );
    drop(busy);
    assert_eq!(send(body).await.unwrap().status(), StatusCode::OK);
    assert_eq!(stats.view().spans_tool, 1);
}

#[tokio::test]
async fn attributes_past_the_255th_are_counted() {
    use std::sync::Arc;
    use toolsize::collector::ingest::recognize::Recognizer;
    use toolsize::collector::ingest::Ingest;
    use toolsize::collector::SelfStats;
    let (tx, _rx) = tokio::sync::mpsc::channel(16);
    let stats = Arc::new(SelfStats::default());
    let ingest = Ingest::new(
        Arc::new(Recognizer::new(&Default::default(), 128)),
        tx,
        stats.clone(),
        1 << 20,
    );
    let mut sp = own_span(1, "read", 10);
    for n in 0..300 {
        sp.attributes.push(s(&format!("x.{n}"), "v"));
    }
    let total = sp.attributes.len() as u64;
    ingest
        .ingest_request(&request("agent", vec![sp]))
        .await
        .unwrap();
    let v = stats.view();
    assert_eq!(v.spans_tool, 1);
    assert_eq!(v.attributes_ignored, total - 255);
}

#[tokio::test]
async fn json_enum_names_are_accepted_like_numbers() {
    let p = Pipeline::spawn(&loopback_config()).unwrap();
    let req = request(
        "agent",
        vec![own_span(1, "grep", 10), own_span(2, "grep", 20)],
    );
    let mut json: serde_json::Value = serde_json::to_value(&req).unwrap();
    let spans = json["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array_mut()
        .unwrap();
    spans[0]["kind"] = "SPAN_KIND_INTERNAL".into();
    spans[1]["kind"] = "SPAN_KIND_CLIENT".into();
    spans[1]["status"] = serde_json::json!({"code": "STATUS_CODE_ERROR", "message": "boom"});
    let body = serde_json::to_vec(&json).unwrap();
    let (st, _, b) = send(&p, post("application/json", None, body)).await;
    assert_eq!(st, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let (_, v) = get(&p, "/api/v1/tools").await;
    assert_eq!(v["tools"][0]["count"], 2);
    assert_eq!(v["tools"][0]["errors"], 1, "{v}");
    spans_kind_unknown(&p).await;
    p.shutdown().await;
}

async fn spans_kind_unknown(p: &Pipeline) {
    let req = request("agent", vec![own_span(3, "grep", 10)]);
    let mut json: serde_json::Value = serde_json::to_value(&req).unwrap();
    json["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["kind"] = "SPAN_KIND_SIDEWAYS".into();
    let (st, _, b) = send(
        p,
        post("application/json", None, serde_json::to_vec(&json).unwrap()),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&b).contains("SPAN_KIND_SIDEWAYS"));
}
