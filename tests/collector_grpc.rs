//! OTLP/gRPC end to end against a daemon on ephemeral ports: plain and gzip exports, partial
//! success, and a message larger than tonic's 4 MiB default.
#![cfg(feature = "collector")]

mod support;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use support::collector::*;
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

/// Sends raw bytes as the Export message.
#[derive(Clone, Copy, Default)]
struct RawCodec;
impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}
impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use prost::bytes::BufMut;
        dst.put_slice(&item);
        Ok(())
    }
}
impl tonic::codec::Decoder for RawCodec {
    type Item = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Self::Item>, tonic::Status> {
        use prost::Message;
        Self::Item::decode(src)
            .map(Some)
            .map_err(|e| tonic::Status::internal(e.to_string()))
    }
}

async fn raw_export(
    addr: std::net::SocketAddr,
    body: Vec<u8>,
    gzip: bool,
) -> Result<(), tonic::Status> {
    raw_call(
        addr,
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        body,
        gzip,
    )
    .await
}

async fn raw_call(
    addr: std::net::SocketAddr,
    path: &'static str,
    body: Vec<u8>,
    gzip: bool,
) -> Result<(), tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel).max_encoding_message_size(usize::MAX);
    if gzip {
        grpc = grpc.send_compressed(tonic::codec::CompressionEncoding::Gzip);
    }
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
    grpc.unary(tonic::Request::new(body), path, RawCodec)
        .await
        .map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_bad_input_gets_otlp_status_codes() {
    let mut cfg = loopback_config();
    cfg.otlp.max_request_bytes = 1 << 20;
    let d = Daemon::start(&cfg).await.unwrap();
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let e = raw_export(d.otlp_grpc_addr, random, false)
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
    // Gzip bomb: small on the wire, over the limit once inflated.
    let e = raw_export(d.otlp_grpc_addr, vec![0u8; 8 << 20], true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
    // Over the limit without compression: refused before it is buffered.
    let e = raw_export(d.otlp_grpc_addr, vec![0u8; 2 << 20], false)
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
    // Empty message: success.
    raw_export(d.otlp_grpc_addr, vec![], false).await.unwrap();
    // The logs and metrics services are served: an empty export of each succeeds.
    for path in [
        "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
        "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
    ] {
        raw_call(d.otlp_grpc_addr, path, vec![], false)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    // A method that is not served: refused before any handler, still counted.
    let e = raw_call(
        d.otlp_grpc_addr,
        "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
        vec![],
        false,
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unimplemented, "{e}");
    let text = metrics(d.admin_addr).await;
    assert_eq!(
        sample(
            &text,
            "toolsize_otlp_requests_refused_total{reason=\"decode\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "toolsize_otlp_requests_refused_total{reason=\"too_large\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            "toolsize_otlp_requests_refused_total{reason=\"unsupported_media_type\"}"
        ),
        Some(1.0)
    );
    // Every call counts as a request, those refused before the handler included.
    assert_eq!(
        sample(&text, "toolsize_otlp_requests_total{transport=\"grpc\"}"),
        Some(7.0)
    );
    for (signal, n) in [("traces", 1.0), ("logs", 1.0), ("metrics", 1.0)] {
        assert_eq!(
            sample(
                &text,
                &format!("toolsize_otlp_requests_accepted_total{{signal=\"{signal}\"}}")
            ),
            Some(n),
            "{signal}"
        );
    }
    d.shutdown().await;
}
