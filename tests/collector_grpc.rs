//! OTLP/gRPC end to end against a daemon on ephemeral ports: plain and gzip exports, partial
//! success, and a message larger than tonic's 4 MiB default.
#![cfg(feature = "collector")]

mod support;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use support::*;
use toolsize::collector::Daemon;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_exports_are_recorded() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let mut client = TraceServiceClient::connect(format!("http://{}", d.otlp_grpc_addr))
        .await
        .unwrap()
        .max_encoding_message_size(64 << 20);
    let spans = (0..100)
        .map(|n| own_span(n, "search", 100 + n as i64))
        .collect();
    let resp = client
        .export(request("agent", spans))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.partial_success, None);

    let mut gz = client
        .clone()
        .send_compressed(tonic::codec::CompressionEncoding::Gzip);
    let spans = (100..200)
        .map(|n| own_span(n, "search", 100 + n as i64))
        .collect();
    gz.export(request("agent", spans)).await.unwrap();

    let mut bad = own_span(7, "search", 1);
    bad.span_id = vec![];
    let resp = client
        .export(request("agent", vec![bad]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.partial_success.unwrap().rejected_spans, 1);

    // 6 MiB of span content: above tonic's 4 MiB default, below the 64 MiB limit.
    let big = span(
        500,
        "execute_tool fetch",
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "fetch"),
            s("gen_ai.tool.call.result", &"x".repeat(6 << 20)),
        ],
    );
    client.export(request("agent", vec![big])).await.unwrap();

    // An empty request is a success.
    client.export(request("agent", vec![])).await.unwrap();

    let v = tools(d.admin_addr, "").await;
    let rows = v["tools"].as_array().unwrap();
    let search = rows.iter().find(|r| r["tool"] == "search").unwrap();
    assert_eq!(search["count"], 200);
    assert_eq!(search["max"], 299);
    let fetch = rows.iter().find(|r| r["tool"] == "fetch").unwrap();
    assert_eq!(fetch["max"], 6 << 20);
    assert_eq!(fetch["derived"], 1);
    d.shutdown().await;
}
